/// What notifications for the managed account may show: the Intune App SDK's `IntuneMAMNotificationPolicy`.
/// Ordered from the most permissive to the strictest (``block``).
public enum NotificationPolicy: Int, Sendable, Hashable, CaseIterable, Comparable {
    /// All notifications are allowed.
    case allow = 0
    /// Only static notifications without organization data ("You've got mail").
    case blockOrgData = 1
    /// No notifications for the managed account.
    case block = 2

    static let names: [(String, NotificationPolicy)] = [("allow", .allow), ("blockOrgData", .blockOrgData), ("block", .block)]

    public static func < (lhs: NotificationPolicy, rhs: NotificationPolicy) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}
