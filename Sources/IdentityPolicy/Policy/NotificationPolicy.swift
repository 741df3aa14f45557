/// What notifications for the managed account may show: the Intune App SDK's `IntuneMAMNotificationPolicy`.
public enum NotificationPolicy: Int, Sendable, Hashable, CaseIterable {
    /// All notifications are allowed.
    case allow = 0
    /// Only static notifications without organization data ("You've got mail").
    case blockOrgData = 1
    /// No notifications for the managed account.
    case block = 2

    static let names: [(String, NotificationPolicy)] = [("allow", .allow), ("blockOrgData", .blockOrgData), ("block", .block)]
}
