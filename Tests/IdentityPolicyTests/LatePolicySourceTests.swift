import IdentityPolicy
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("IdentityTesting's LatePolicySource: a policy source that loads later")
struct LatePolicySourceTests {
    @Test("until load: not loaded, no policies; load sets them, then calls the handler once, seeing them set")
    func loadsLater() {
        let source = LatePolicySource()
        #expect(!source.hasLoaded)
        #expect(source.policies == .empty)
        let seen = LockedValue<[Bool]>([])
        source.setChangeHandler { [source] in
            let observed = source.hasLoaded && source.policy(for: "alice@contoso.com") != nil
            seen.withLock { $0.append(observed) }
        }
        source.load(tenants: ["contoso.com": Policy(identity: nil)])
        #expect(source.hasLoaded)
        #expect(seen.withLock { $0 } == [true])
    }

    @Test("loadingAfterFirstRead: the first read returns the empty set, and the source has loaded when it returns")
    func loadsDuringFirstRead() {
        let loaded = PolicySet(tenants: ["contoso.com": Policy(identity: nil)])
        let source = LatePolicySource(loadingAfterFirstRead: loaded)
        let notified = LockedValue(0)
        source.setChangeHandler { notified.withLock { $0 += 1 } }
        #expect(!source.hasLoaded)
        #expect(source.policies == .empty)
        #expect(source.hasLoaded)
        #expect(notified.withLock { $0 } == 1)
        #expect(source.policies == loaded)
        #expect(notified.withLock { $0 } == 1)
    }

    @Test("a manager over it refuses admission until the load, then admits")
    func managerWaitsForLoad() async throws {
        let source = LatePolicySource()
        let manager = PolicyManager(policySource: source)
        await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity("alice@contoso.com") {} }
        source.load(["alice@contoso.com": Policy(identity: nil)])
        try await manager.withAdmittedIdentity("alice@contoso.com") {}
    }
}
