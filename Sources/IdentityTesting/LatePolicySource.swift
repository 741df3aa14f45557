import IdentityPolicy
import IdentityRuntime

/// A `PolicySource` whose policies arrive later, as a database's or a network's do: until
/// ``load(_:tenants:)`` it has not loaded (``hasLoaded`` is `false`, ``policies`` is empty), so a
/// `PolicyManager` over it denies every decision on owned data, as it must before any policy was read.
///
/// ```swift
/// let source = LatePolicySource()
/// let manager = PolicyManager(policySource: source)
/// // Before the load: owned data is refused with ProtectionError.policyUnavailable.
/// source.load(tenants: ["contoso.com": policy])
/// // After it: the manager has been told (change handler) and decides from the policies.
/// ```
///
/// ``load(_:tenants:)`` sets the policies, marks the source loaded and then calls the change handler, outside
/// the source's lock, on the calling thread: call it from another thread to model a load that finishes in the
/// background.
///
/// To force the interleaving in which the first load finishes while the manager is between its read of
/// ``policies`` and its read of ``hasLoaded``, make the source with ``init(loadingAfterFirstRead:)``: its
/// first read of ``policies`` returns the (empty) policies it has, then loads the ones given, before it
/// returns.
///
/// > Note: A test double. A source of your own implements `reload(deadline:)`
/// > too; this one keeps the protocol's default (nothing to read again).
public final class LatePolicySource: PolicySource {
    private struct State {
        var policies = PolicySet()
        var loaded = false
        var handler: (@Sendable () -> Void)?
        var loadAfterFirstRead: PolicySet?
    }

    private let state: LockedValue<State>

    /// A source that has not loaded; ``load(_:tenants:)`` loads it.
    public init() {
        state = LockedValue(State())
    }

    /// A source that has not loaded and loads `policies` itself during the first read of ``policies``,
    /// after that read took its value (which is empty): the manager that read it sees an empty set, then
    /// ``hasLoaded`` `true` and a change notification.
    public init(loadingAfterFirstRead policies: PolicySet) {
        state = LockedValue(State(loadAfterFirstRead: policies))
    }

    /// The policies loaded so far: empty until the first load.
    public var policies: PolicySet {
        let (snapshot, pending) = state.withLock { state -> (PolicySet, PolicySet?) in
            defer { state.loadAfterFirstRead = nil }
            return (state.policies, state.loadAfterFirstRead)
        }
        if let pending { load(pending) }
        return snapshot
    }

    /// Whether ``load(_:tenants:)`` ran (or the load after the first read, with ``init(loadingAfterFirstRead:)``).
    public var hasLoaded: Bool {
        state.withLock { $0.loaded }
    }

    public func setChangeHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLock { $0.handler = handler }
    }

    /// Loads accounts' own policies and tenants' policies (replacing any loaded before), marks the source
    /// loaded, then calls the change handler, outside the lock.
    public func load(_ policies: [Identity: Policy] = [:], tenants: [TenantID: Policy] = [:]) {
        load(PolicySet(accounts: policies, tenants: tenants))
    }

    /// Loads `policies` (replacing any loaded before), marks the source loaded, then calls the change
    /// handler, outside the lock.
    public func load(_ policies: PolicySet) {
        let handler = state.withLock { state in
            state.policies = policies
            state.loaded = true
            return state.handler
        }
        handler?()
    }
}
