/// Why an account is blocked. Values 0...3 are those of the Intune App SDK's `IntuneMAMBlockAccountReason`;
/// 100 and up are this runtime's own, numbered apart so that new SDK values never collide with them.
///
/// | raw value | case | cause | cleared by |
/// |---|---|---|---|
/// | 0 | ``notBlocked`` | — | — |
/// | 1 | ``conditionalLaunchBlocked`` | a conditional-launch check failed | ``PolicyManager/unblockAccount(_:reason:)``, a wipe |
/// | 2 | ``conditionalLaunchCanceled`` | a conditional-launch check was cancelled by the user | ``PolicyManager/unblockAccount(_:reason:)``, a wipe |
/// | 3 | ``clockedOut`` | the account's user is off shift | ``PolicyManager/unblockAccount(_:reason:)`` |
/// | 100 | ``blockedByPolicy`` | its policy (or its tenant's) says `"accountBlocked": true` | a policy without it |
/// | 101 | ``blockedByAdministrator`` | ``PolicyManager/blockAccount(_:reason:)`` by the app or an operator | ``PolicyManager/unblockAccount(_:reason:)`` |
/// | 102 | ``wiped`` | a selective wipe of the account started (``PolicyManager/wipeData(forAccount:)``) | a new enrollment of the account, ``PolicyManager/unblockAccount(_:reason:)`` |
/// | 103 | ``admissionCheckFailed`` | one of its ``AdmissionCheck``s denied it | an admission after ``RuntimeSettings/admissionRetryInterval`` whose checks pass, ``PolicyManager/unblockAccount(_:reason:)`` |
///
/// When several causes hold at once, ``PolicyManager/blockReason(for:)`` names the one with the lowest raw
/// value, and the account stays blocked until every cause has cleared.
public enum BlockAccountReason: Int, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
    /// The account is not blocked.
    case notBlocked = 0
    /// A conditional-launch check failed (wrong PIN too often, non-compliant device).
    case conditionalLaunchBlocked = 1
    /// The user cancelled a conditional-launch check.
    case conditionalLaunchCanceled = 2
    /// The account's user is clocked out (shift workers).
    case clockedOut = 3
    /// The account's policy, or its tenant's, blocks it (`"accountBlocked": true` in the policy document).
    case blockedByPolicy = 100
    /// Blocked by the app or an administrator through ``PolicyManager/blockAccount(_:reason:)``.
    case blockedByAdministrator = 101
    /// The account's data was wiped (or is being wiped): nothing new is created for it, and nothing of it is
    /// admitted, until it is enrolled again or unblocked.
    case wiped = 102
    /// An ``AdmissionCheck`` denied the account (token revoked, tenant suspended).
    case admissionCheckFailed = 103

    public static func < (lhs: BlockAccountReason, rhs: BlockAccountReason) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    public var description: String {
        switch self {
        case .notBlocked: "notBlocked"
        case .conditionalLaunchBlocked: "conditionalLaunchBlocked"
        case .conditionalLaunchCanceled: "conditionalLaunchCanceled"
        case .clockedOut: "clockedOut"
        case .blockedByPolicy: "blockedByPolicy"
        case .blockedByAdministrator: "blockedByAdministrator"
        case .wiped: "wiped"
        case .admissionCheckFailed: "admissionCheckFailed"
        }
    }
}

/// The app's answer to ``PolicyDelegate/blockAccount(_:reason:window:completionHandler:)``. Raw values are those
/// of the Intune App SDK's `IntuneMAMBlockAccountResult`.
public enum BlockAccountResult: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The app has removed the account from view and dropped what it held for it (sessions, caches).
    case success = 0
    /// The app could not. The runtime keeps the account blocked all the same and asks for a restart
    /// (``PolicyManager/restartApplication()``): a service drains and exits so that its supervisor starts it
    /// clean, with nothing of the account left in memory.
    case failed = 1

    public var description: String {
        switch self {
        case .success: "success"
        case .failed: "failed"
        }
    }
}
