import IdentityAssertions
import IdentityHTTP
import IdentityPolicy
import IdentityRuntime
import Synchronization

extension BenchCommand {
    /// The `edge-verify` pair: what the HTTP middlewares and the gRPC interceptor pay per request to learn who
    /// a cached reusable token speaks for, before admission (64 registered accounts in 8 tenants, as in
    /// `Benchmarks/Edge`; every token verified once in the warm-up).
    /// - **raw**: `IdentityAssertionVerifier.verify` alone (reusable mode, a cache hit);
    /// - **peer**: the same, then what a service writes without the policy module: the account's tenant from a
    ///   mutex-guarded dictionary, compared with the token's `tid`;
    /// - **ours**: `IdentityHTTPVerification`: the verification, the tenant check, the policy-unavailable
    ///   check and the account's policy, as both middlewares call it.
    static func edgeVerifyPair(operations: Int) -> Pair {
        var tenantPolicies: [TenantID: Policy] = [:]
        for tenant in 0..<8 {
            tenantPolicies[TenantID("tenant\(tenant).example")] =
                Policy(identity: nil, isFileEncryptionRequired: tenant.isMultiple(of: 2))
        }
        let manager = PolicyManager(policySource: StaticPolicySource(tenants: tenantPolicies))
        var peerTenants: [Identity: String] = [:]
        for user in 0..<64 {
            let account = Identity("user\(user)@tenant\(user % 8).example")
            manager.registerAccount(account, tenantID: TenantID("tenant\(user % 8).example"))
            peerTenants[account] = "tenant\(user % 8).example"
        }
        let tenants = Mutex(peerTenants)
        let accepted = Mutex(0)
        func count(_ hits: Int) { accepted.withLock { $0 &+= hits } }
        return Pair(
            name: "edge-verify", title: "who a cached bearer token speaks for, at the HTTP edge", targetRatio: nil,
            operations: operations,
            raw: { total in count(cachedVerifications(total)) },
            peer: { total in
                count(cachedVerifications(total) { assertion in
                    let known = tenants.withLock { $0[assertion.account] }
                    return known != nil && known == assertion.tenant
                })
            },
            ours: { total in
                let pool = AssertionPool.shared
                let verifier = cachedPairVerifier
                var hits = 0
                for index in 0..<total {
                    let token = IdentityHTTPToken(token: pool.tokens[index % pool.tokens.count], source: .bearerToken)
                    if (try? IdentityHTTPVerification(
                        token: token, verifier: verifier, policies: manager, checksTenant: true)) != nil {
                        hits &+= 1
                    }
                }
                count(hits)
            })
    }
}
