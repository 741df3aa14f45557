import Foundation

extension Notification.Name {
    /// The policy of some identity changed (a document changed on disk, enrollment received a new policy,
    /// the primary user changed). `object`: the ``PolicyManager``.
    public static let policyDidChange = Notification.Name("IdentityPolicy.policyDidChange")
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
}
