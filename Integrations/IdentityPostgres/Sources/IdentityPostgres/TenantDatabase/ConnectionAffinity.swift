import NIOConcurrencyHelpers
import PostgresNIO

/// The tenant each connection of the shared pool was first bound to. A session keeps the *names* of custom
/// settings a body made (`set_config('x.' || value, ...)`) for as long as it lives, even after `RESET ALL` or
/// `DISCARD ALL`, and nothing lists them; so a connection is bound to one tenant only, and closed rather than
/// bound to another. An entry lives as long as its connection: it goes when the connection closes.
final class ConnectionAffinity: Sendable {
    private let tenants = NIOLockedValueBox<[Int: String]>([:])

    /// Records `tenant` for a connection that has none; whether the connection may be bound to `tenant`.
    func claim(_ connection: PostgresConnection, for tenant: String) -> Bool {
        let id = connection.id
        let (allowed, isNew) = tenants.withLockedValue { tenants -> (Bool, Bool) in
            if let served = tenants[id] { return (served == tenant, false) }
            tenants[id] = tenant
            return (true, true)
        }
        if isNew {
            // Registered outside the lock: on a connection already closed the callback runs at once.
            connection.closeFuture.whenComplete { [tenants] _ in
                _ = tenants.withLockedValue { $0.removeValue(forKey: id) }
            }
        }
        return allowed
    }
}
