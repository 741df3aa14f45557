/// Where a managed account's data may go: to which other accounts it may be transferred (a file re-owned, a
/// copy saved under another account) and which readers may see it (``PolicyManager/isDataTransferAllowed(from:to:)``).
/// The service analog of the SDK's cut/copy/paste levels (blocked, policy-managed, any).
///
/// Ordered from the most restrictive (``none``) to the least (``any``); a combined policy takes the lowest.
public enum DataTransferLevel: Int, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
    /// Only the account itself ("blocked").
    case none = 0
    /// Managed accounts of the same tenant: the default of a policy document.
    case sameTenant = 1
    /// Any managed account, in any tenant ("policy-managed").
    case managedAccounts = 2
    /// Any account, managed or not, and code with no identity.
    case any = 3

    public static func < (lhs: DataTransferLevel, rhs: DataTransferLevel) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    public var description: String { Self.names.first { $0.1 == self }?.0 ?? "\(rawValue)" }

    /// The names used in policy documents.
    static let names: [(String, DataTransferLevel)] = [
        ("none", .none), ("sameTenant", .sameTenant), ("managedAccounts", .managedAccounts), ("any", .any),
    ]
}
