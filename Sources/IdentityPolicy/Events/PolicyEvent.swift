import IdentityRuntime

/// Everything the policy module announces, for Swift concurrency users: the `Notification.Name`s as values.
/// Read them from ``PolicyManager/events``.
public enum PolicyEvent: Sendable, Hashable {
    /// See `Notification.Name.policyDidChange`.
    case policyDidChange
    /// See `Notification.Name.wipeDidComplete`.
    case wipeDidComplete(account: Identity)
    /// See `Notification.Name.uiIdentityDidChange`.
    case uiIdentityDidChange(window: WindowID, identity: Identity?)
    /// See `Notification.Name.primaryUserDidChange`.
    case primaryUserDidChange(Identity?)
    /// See `Notification.Name.allowedAccountsDidChange`.
    case allowedAccountsDidChange([Identity]?)
    /// An enrollment operation finished (see ``EnrollmentDelegate``).
    case enrollmentStatus(EnrollmentStatus)
    /// See `Notification.Name.restartRequired`.
    case restartRequired
}
