import NIOConcurrencyHelpers

/// The tenant each connection of the shared pool was first bound to. A session keeps the *names* of custom
/// settings a body made (`set_config('x.' || value, ...)`) for as long as it lives, even after `RESET ALL` or
/// `DISCARD ALL`, and nothing lists them; so a connection is bound to one tenant only, and closed rather than
/// bound to another.
final class ConnectionAffinity: Sendable {
    private let tenants = NIOLockedValueBox<[Int: String]>([:])

    /// Records `tenant` for a connection that has none; whether the connection may be bound to `tenant`.
    func claim(_ connection: Int, for tenant: String) -> Bool {
        tenants.withLockedValue { tenants in
            if let served = tenants[connection] { return served == tenant }
            tenants[connection] = tenant
            return true
        }
    }
}
