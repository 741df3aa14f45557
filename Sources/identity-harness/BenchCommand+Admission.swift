import IdentityPolicy
import IdentityRuntime
import Synchronization

extension BenchCommand {
    /// The `admission` pair: what a service pays per request at its boundary to admit a managed account, the
    /// call the HTTP middlewares and the gRPC interceptor make for every request.
    /// - **raw**: the scope alone, `IdentityContext.withThreadIdentity` around the (empty) handler;
    /// - **peer**: what a service writes without the policy module: a mutex-guarded set of blocked accounts read,
    ///   then the same scope;
    /// - **ours**: `PolicyManager.withAdmittedIdentity` of a registered managed account (policies loaded, no
    ///   admission checks, no observer).
    ///
    /// Each member runs its operations one after another in one task, so the count-0 run takes the task's
    /// start off.
    static func admissionPair(operations: Int) -> Pair {
        let account: Identity = "alice@contoso.com"
        let manager = PolicyManager(policySource: StaticPolicySource(tenants: [
            "contoso.com": Policy(identity: nil, isFileEncryptionRequired: true),
        ]))
        manager.registerAccount(account)
        let blocked = Mutex<Set<Identity>>([])
        let sink = Counter()
        return Pair(
            name: "admission", title: "admit a managed account and run the handler under it", targetRatio: nil,
            operations: operations,
            raw: { count in
                blocking {
                    for _ in 0..<count { await IdentityContext.withThreadIdentity(account) { () async in sink.value &+= 1 } }
                }
            },
            peer: { count in
                blocking {
                    for _ in 0..<count where !blocked.withLock({ $0.contains(account) }) {
                        await IdentityContext.withThreadIdentity(account) { () async in sink.value &+= 1 }
                    }
                }
            },
            ours: { count in
                blocking {
                    for _ in 0..<count {
                        do {
                            try await manager.withAdmittedIdentity(account) { sink.value &+= 1 }
                        } catch {
                            fatalError("bench: the managed account was not admitted: \(error)")
                        }
                    }
                }
            })
    }
}
