import IdentityRuntime

/// Where policies come from: accounts' own policy documents and tenants' documents. ``PolicyManager`` reads
/// ``policies`` when the source tells it that they changed, and keeps its own index of them, so a lookup never
/// reaches into the source.
///
/// The embedded default is ``DirectoryPolicySource``; ``StaticPolicySource`` holds policies in memory.
public protocol PolicySource: AnyObject, Sendable {
    /// Every policy the source holds now. Called once at installation and after each change notification.
    var policies: PolicySet { get }

    /// Installs the handler called (on any thread, outside the source's locks) after the policies changed.
    /// `nil` removes it. A source that loads after it was made calls it after its first load too.
    func setChangeHandler(_ handler: (@Sendable () -> Void)?)

    /// Whether the source has read its policies at least once. Until it has, a ``PolicyManager`` over it
    /// cannot tell a managed account from an unmanaged one, and refuses every operation on owned data with
    /// `ProtectionError.policyUnavailable` (deny by default). The default is `true`: a source whose
    /// ``policies`` are at hand from its creation (``StaticPolicySource``, ``DirectoryPolicySource``).
    var hasLoaded: Bool { get }

    /// Reads the policies again now, from wherever they live, calls the change handler when they changed,
    /// and returns whether they did; answered by `deadline`. ``PolicyManager/reloadPolicies(timeout:)`` calls
    /// it. Policy decisions never wait for it: they use the last policies read (and refuse, while there are
    /// none, as ``hasLoaded`` says).
    ///
    /// A source that reaches a database implements it with its client's asynchronous API; the default
    /// answers `false` (a source whose policies are set in memory has nothing to read).
    /// - Throws: ``PolicyDocumentError/directoryUnreadable(path:reason:)`` when the policies could not be read
    ///   by `deadline`; the policies in force stay.
    func reload(deadline: ContinuousClock.Instant) async throws(PolicyDocumentError) -> Bool

    /// The problems found by the last read: documents that could not be used (each naming its path, position
    /// and key), duplicates, a store that could not be read. ``PolicyManager`` reads them with ``policies``,
    /// lists them in ``PolicyManager/policyErrors``, logs each new one and posts
    /// ``PolicyEvent/policyErrorsDidChange(_:)``. The default is empty (a source that reads no documents).
    var errors: [PolicyDocumentError] { get }
}

extension PolicySource {
    public var hasLoaded: Bool { true }

    public var errors: [PolicyDocumentError] { [] }

    public func reload(deadline: ContinuousClock.Instant) async throws(PolicyDocumentError) -> Bool { false }

    /// The policy of `identity`: its own document, else its tenant's (by the domain of its name), else `nil`.
    /// ``PolicyManager/policy(for:)-(Identity?)`` also knows tenants registered by ID and the manager's rules
    /// for managed accounts without a policy.
    public func policy(for identity: Identity) -> Policy? {
        policies.policy(for: identity)
    }
}

/// A ``PolicySource`` that holds policies in memory, for tests and for apps that fetch policies themselves.
public final class StaticPolicySource: PolicySource {
    private struct State {
        var policies = PolicySet()
        var handler: (@Sendable () -> Void)?
    }

    private let state = LockedValue(State())

    /// A source with accounts' own policies and, optionally, tenants' policies.
    public init(_ policies: [Identity: Policy] = [:], tenants: [TenantID: Policy] = [:]) {
        state.withLock { $0.policies = PolicySet(accounts: policies, tenants: tenants) }
    }

    public var policies: PolicySet {
        state.withLock { $0.policies }
    }

    /// Sets (or with `nil`, removes) the policy of `identity`, then calls the change handler.
    public func setPolicy(_ policy: Policy?, for identity: Identity) {
        update { $0.accounts[identity] = policy }
    }

    /// Sets (or with `nil`, removes) the policy of every account of `tenant` that has none of its own, then
    /// calls the change handler.
    public func setPolicy(_ policy: Policy?, forTenant tenant: TenantID) {
        update { $0.tenants[tenant] = policy }
    }

    /// Replaces every policy at once (one change notification).
    public func setPolicies(_ policies: PolicySet) {
        update { $0 = policies }
    }

    private func update(_ change: (inout PolicySet) -> Void) {
        let handler = state.withLock { state in
            change(&state.policies)
            return state.handler
        }
        handler?()
    }

    public func setChangeHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLock { $0.handler = handler }
    }
}
