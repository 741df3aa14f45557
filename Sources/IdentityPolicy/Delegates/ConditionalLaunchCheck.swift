import IdentityRuntime

/// What a conditional-launch check decided.
public enum ConditionalLaunchOutcome: Sendable, Hashable {
    /// The identity may be shown: the next check runs, or the switch happens.
    case passes
    /// The user backed out (e.g. dismissed a PIN prompt): the switch completes ``SwitchIdentityResult/canceled``.
    case cancels
    /// The check failed (wrong PIN too often, non-compliant device): the switch completes
    /// ``SwitchIdentityResult/failed``.
    case fails
}

/// A check that runs before a managed identity's data is shown: PIN, re-authentication, device compliance.
///
/// Registered checks run in registration order, one after another, each time
/// ``PolicyManager/setUIPolicyIdentity(_:for:completionQueue:completionHandler:)`` switches to the managed
/// identity. The first check that does not pass ends the switch. A check may suspend for as long as it needs
/// (showing UI, calling a service).
///
/// > Note: When a newer call for the same window supersedes the switch, the task running the checks is
/// > cancelled. A check should return promptly when `Task.isCancelled`; whatever it returns then is ignored and
/// > the superseded call completes ``SwitchIdentityResult/canceled``.
public protocol ConditionalLaunchCheck: Sendable {
    /// Decides whether `identity` may be shown in `window`.
    func evaluate(identity: Identity, window: WindowID) async -> ConditionalLaunchOutcome
}

/// A ``ConditionalLaunchCheck`` made from a closure.
public struct ClosureConditionalLaunchCheck: ConditionalLaunchCheck {
    private let body: @Sendable (Identity, WindowID) async -> ConditionalLaunchOutcome

    /// A check that answers with `body`'s outcome for the account and the window.
    public init(_ body: @escaping @Sendable (Identity, WindowID) async -> ConditionalLaunchOutcome) {
        self.body = body
    }

    public func evaluate(identity: Identity, window: WindowID) async -> ConditionalLaunchOutcome {
        await body(identity, window)
    }
}
