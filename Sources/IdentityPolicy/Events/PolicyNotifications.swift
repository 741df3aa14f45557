import Foundation

extension Notification.Name {
    /// The policy of some identity changed (a document changed on disk, enrollment received a new policy, an
    /// account was enrolled or unenrolled). `object`: the ``PolicyManager``; `userInfo["accounts"]`: the names
    /// of the known accounts whose policy changed, `userInfo["tenants"]`: the tenants whose document changed
    /// (both absent after a check-in that does not say).
    public static let policyDidChange = Notification.Name("IdentityPolicy.policyDidChange")
    /// An account became managed or stopped being managed. `userInfo["account"]`: its name;
    /// `userInfo["managed"]`: `true` or `false`.
    public static let managedAccountsDidChange = Notification.Name("IdentityPolicy.managedAccountsDidChange")
    /// An account was blocked or unblocked. `userInfo["account"]`: its name; `userInfo["reason"]`: the
    /// ``BlockAccountReason`` raw value (absent when unblocked).
    public static let blockedAccountsDidChange = Notification.Name("IdentityPolicy.blockedAccountsDidChange")
    /// A selective wipe finished. `object`: the ``PolicyManager``; `userInfo["account"]`: the account's name.
    public static let wipeDidComplete = Notification.Name("IdentityPolicy.wipeDidComplete")
    /// The UI identity of a window changed through a handshake. `userInfo["window"]`, `userInfo["identity"]`
    /// (absent when cleared).
    public static let uiIdentityDidChange = Notification.Name("IdentityPolicy.uiIdentityDidChange")
    /// The primary (enrolled, managed) user changed. `userInfo["account"]` (absent when there is none).
    public static let primaryUserDidChange = Notification.Name("IdentityPolicy.primaryUserDidChange")
    /// An enrollment operation finished. `userInfo["status"]`: the ``EnrollmentStatusCode`` raw value;
    /// `userInfo["account"]`: the account.
    public static let enrollmentStatusDidChange = Notification.Name("IdentityPolicy.enrollmentStatusDidChange")
    /// The accounts allowed to enroll changed. `object`: the ``PolicyManager``.
    public static let allowedAccountsDidChange = Notification.Name("IdentityPolicy.allowedAccountsDidChange")
    /// The runtime needs the app to restart and the delegate did not handle it (see
    /// ``PolicyDelegate/restartApplication()``).
    public static let restartRequired = Notification.Name("IdentityPolicy.restartRequired")
    /// The problems the policy source reports changed (``PolicyManager/policyErrors``). `object`: the
    /// ``PolicyManager``; `userInfo["errors"]`: each current error as `path:line:column: key: message`
    /// (empty when the last one was fixed).
    public static let policyErrorsDidChange = Notification.Name("IdentityPolicy.policyErrorsDidChange")
}
