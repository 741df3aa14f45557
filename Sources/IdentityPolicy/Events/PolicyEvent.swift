import IdentityRuntime

/// Everything the policy module announces, for Swift concurrency users: the `Notification.Name`s as values.
/// Read them from ``PolicyManager/events``.
public enum PolicyEvent: Sendable, Hashable {
    /// See `Notification.Name.policyDidChange`. Followed by ``accountPoliciesDidChange(accounts:tenants:)`` when
    /// the manager knows which accounts changed.
    case policyDidChange
    /// The policies of these known accounts (sorted by name) and of these tenants (sorted) changed: added,
    /// removed or edited. Accounts managed only through a tenant's domain document are covered by `tenants`.
    case accountPoliciesDidChange(accounts: [Identity], tenants: [TenantID])
    /// The account became managed (enrolled, or given a policy). See
    /// `Notification.Name.managedAccountsDidChange`.
    case accountManaged(Identity)
    /// The account is no longer managed (unenrolled, or its policy removed).
    case accountUnmanaged(Identity)
    /// The account became blocked, for `reason`. See `Notification.Name.blockedAccountsDidChange`.
    case accountBlocked(Identity, reason: BlockAccountReason)
    /// Every cause of the account's block cleared.
    case accountUnblocked(Identity)
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
    /// The problems the policy source reports changed (``PolicyManager/policyErrors``): every current one,
    /// sorted by path; empty when the last one was fixed. See `Notification.Name.policyErrorsDidChange`.
    case policyErrorsDidChange([PolicyDocumentError])
}
