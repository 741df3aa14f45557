import Foundation
import PostgresNIO

/// Where the fleet's database is and how long anything may take. Every operation that reaches the database
/// has a deadline; nothing waits without one.
///
/// ```swift
/// var configuration = PostgresFleetConfiguration(host: "db.internal", username: "identity", database: "identity")
/// configuration.password = secret
/// configuration.queryTimeout = 1
/// ```
///
/// ``fromEnvironment(_:)`` reads libpq's standard variables (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`,
/// `PGDATABASE`).
public struct PostgresFleetConfiguration: Sendable {
    /// The server's host name or address.
    public var host: String
    /// The server's TCP port.
    public var port: Int
    /// The role to log in as.
    public var username: String
    /// Its password, if the server asks for one.
    public var password: String?
    /// The database; the server's default for `username` when `nil`.
    public var database: String?
    /// TLS to the server: `.disable` (the default, for loopback and private networks), `.prefer` or `.require`.
    public var tls: PostgresConnection.Configuration.TLS

    /// Seconds a connection attempt may take (TCP, TLS, authentication, schema migration).
    public var connectTimeout: TimeInterval = 2
    /// Seconds one query may take before it is abandoned with ``PostgresFleetError/timedOut(operation:seconds:)``
    /// and its connection is closed (a slow database is treated like a lost one).
    public var queryTimeout: TimeInterval = 2
    /// Seconds one call of a store (``PostgresKeyStore``, ``PostgresPolicySource``) may take in all: waiting
    /// for a connection, its queries, the retries. One deadline, set when the call starts, bounds everything
    /// the call waits on, so timeouts never add up; past it the call fails with
    /// ``PostgresFleetError/timedOut(operation:seconds:)`` (for the key store,
    /// `ProtectionError.keyStoreUnavailable`, 113).
    public var callTimeout: TimeInterval = 2
    /// After a failed connection attempt, operations fail at once (no new attempt) for this many seconds; the
    /// background task keeps trying to reconnect at this interval, doubling up to ``maximumReconnectInterval``.
    public var reconnectInterval: TimeInterval = 0.25
    /// The longest interval between two reconnection attempts.
    public var maximumReconnectInterval: TimeInterval = 2
    /// Seconds a key fetched from the database is used from memory without asking again, while change
    /// notifications arrive. See ``PostgresKeyStore`` for the rules while the database is unreachable.
    public var cacheLifetime: TimeInterval = 60
    /// Seconds cached keys keep working after the notification connection was lost (the database is down or
    /// unreachable). Past that, operations that need a key refuse with
    /// `ProtectionError.keyStoreUnavailable` until the database is back: a wipe made elsewhere meanwhile
    /// cannot be heard of, so this bounds how long a shredded key could still be used here.
    public var disconnectedGrace: TimeInterval = 30
    /// Seconds between full re-reads of the policy table, a safety net beside the notifications.
    public var policyPollInterval: TimeInterval = 5

    /// A configuration with the default timeouts.
    public init(
        host: String = "127.0.0.1", port: Int = 5432, username: String, password: String? = nil,
        database: String? = nil, tls: PostgresConnection.Configuration.TLS = .disable
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
    }

    /// A configuration from libpq's variables in `environment`: `PGHOST` (required; `nil` when it is not set),
    /// `PGPORT` (5432), `PGUSER` (`postgres`), `PGPASSWORD`, `PGDATABASE`.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> PostgresFleetConfiguration? {
        guard let host = environment["PGHOST"], !host.isEmpty else { return nil }
        return PostgresFleetConfiguration(
            host: host, port: environment["PGPORT"].flatMap(Int.init) ?? 5432,
            username: environment["PGUSER"] ?? "postgres", password: environment["PGPASSWORD"],
            database: environment["PGDATABASE"])
    }

    var connectionConfiguration: PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = .nanoseconds(Int64(max(connectTimeout, 0.001) * 1e9))
        return configuration
    }
}
