import IdentityRuntime

/// Where policies come from. ``PolicyManager`` asks it for the policy of the managed account and listens for
/// changes. The embedded default is ``DirectoryPolicySource``; ``StaticPolicySource`` holds policies in memory.
public protocol PolicySource: AnyObject, Sendable {
    /// The policy of `identity` (a managed account), or `nil` when the source has none for it.
    func policy(for identity: Identity) -> Policy?

    /// Installs the handler called (on any thread, outside the source's locks) after the policies changed.
    /// `nil` removes it.
    func setChangeHandler(_ handler: (@Sendable () -> Void)?)
}

/// A ``PolicySource`` that holds policies in memory, for tests and for apps that fetch policies themselves.
public final class StaticPolicySource: PolicySource {
    private struct State {
        var policies: [Identity: Policy] = [:]
        var handler: (@Sendable () -> Void)?
    }

    private let state = LockedValue(State())

    public init(_ policies: [Identity: Policy] = [:]) {
        state.withLock { $0.policies = policies }
    }

    /// Sets (or with `nil`, removes) the policy of `identity`, then calls the change handler.
    public func setPolicy(_ policy: Policy?, for identity: Identity) {
        let handler = state.withLock { state in
            state.policies[identity] = policy
            return state.handler
        }
        handler?()
    }

    public func policy(for identity: Identity) -> Policy? {
        state.withLock { $0.policies[identity] }.map { policy in
            var policy = policy
            policy.identity = identity
            return policy
        }
    }

    public func setChangeHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLock { $0.handler = handler }
    }
}
