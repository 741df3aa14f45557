import IdentityPolicy
import Synchronization

/// The values of the `tenant` dimension: the first tenants seen, up to a limit, by their own name; later ones
/// as ``other``. A tenant whose name could hold an account name (a domain-less account's own tenant, written
/// `name@`, or any name with an `@`) is never a value: it is ``none``.
final class TenantLabels: Sendable {
    static let other = "other"
    static let none = "none"

    private let limit: Int
    /// The tenants given a value of their own, with the spelling first seen (tenants compare case-insensitively).
    private let named = Mutex<[TenantID: String]>([:])

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    func label(_ tenant: TenantID) -> String {
        let name = tenant.rawValue
        guard !name.isEmpty, !name.contains("@") else { return Self.none }
        return named.withLock { named in
            if let label = named[tenant] { return label }
            guard named.count < limit else { return Self.other }
            named[tenant] = name
            return name
        }
    }
}
