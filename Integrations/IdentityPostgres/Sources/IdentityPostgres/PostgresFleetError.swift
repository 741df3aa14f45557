import IdentityProtection
import PostgresNIO

/// Why the fleet's database could not answer. ``PostgresKeyStore`` reports these as
/// `ProtectionError.keyStoreUnavailable(reason:)` (code 113) with this error's description as the reason;
/// ``PostgresFleet`` and ``PostgresPolicySource`` report them as they are.
public enum PostgresFleetError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection could be made (refused, unreachable, authentication failed, timed out); or the last attempt
    /// failed less than the reconnect interval ago and the fleet is waiting before it tries again.
    case unavailable(reason: String)
    /// `operation` took longer than `seconds`; its connection was closed and will be made again.
    case timedOut(operation: String, seconds: Double)
    /// The server refused `operation` (`sqlState` is PostgreSQL's five-character code when it sent one).
    case queryFailed(operation: String, sqlState: String?, message: String)
    /// A row that the schema should not allow: a key of the wrong length, a missing column.
    case corruptRow(table: String, reason: String)
    /// A key is wrapped under a key-encryption key that this instance's provider does not hold.
    case unknownKeyEncryptionKey(id: String)
    /// ``PostgresFleet/shutdown()`` was called.
    case shutDown

    public var description: String {
        switch self {
        case let .unavailable(reason): "the fleet database is unavailable: \(reason)"
        case let .timedOut(operation, seconds): "\(operation) timed out after \(seconds) s"
        case let .queryFailed(operation, sqlState, message): "\(operation) failed\(sqlState.map { " (SQLSTATE \($0))" } ?? ""): \(message)"
        case let .corruptRow(table, reason): "a row of \(table) is malformed: \(reason)"
        case let .unknownKeyEncryptionKey(id): "key-encryption key \(String(reflecting: id)) is not held by this instance"
        case .shutDown: "the fleet connection was shut down"
        }
    }

    /// The key store's form of the error.
    var protectionError: ProtectionError {
        .keyStoreUnavailable(reason: description)
    }

    /// Classifies an error from PostgresNIO; server messages are kept, connection failures become ``unavailable(reason:)``.
    static func from(_ error: any Error, operation: String) -> PostgresFleetError {
        if let fleet = error as? PostgresFleetError { return fleet }
        if let psql = error as? PSQLError {
            if psql.code == .server {
                return .queryFailed(
                    operation: operation, sqlState: psql.serverInfo?[.sqlState],
                    message: psql.serverInfo?[.message] ?? "server error")
            }
            let underlying = psql.underlying.map { " (\($0))" } ?? ""
            return .unavailable(reason: "\(operation): \(psql.code)\(underlying)")
        }
        return .unavailable(reason: "\(operation): \(error)")
    }
}
