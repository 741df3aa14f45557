import IdentityPolicy
import IdentityRuntime

/// Why ``TenantDatabase`` refused a transaction, its set-up, or its start.
///
/// The refusals about the caller (``noIdentity``, ``unmanagedIdentity``, ``policyUnavailable(reason:)``,
/// ``accountBlocked(_:reason:)``, ``accountNotAllowed(_:)``, ``unrepresentableName(_:)``) and ``notVerified``
/// are decided before the database is asked: no connection is leased, no statement is sent.
public enum TenantDatabaseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The caller runs with no identity (no thread identity and no process identity): a transaction is bound
    /// to an account and its tenant, and there is none.
    case noIdentity
    /// The caller's effective identity is `Identity.unmanaged` (`""`): no account, so no tenant.
    case unmanagedIdentity
    /// The `PolicyManager`'s policy source has not loaded yet, so nobody can tell whether the account is blocked
    /// or managed (`ProtectionError.policyUnavailable(reason:)`'s reason).
    case policyUnavailable(reason: String)
    /// The account is blocked (`PolicyManager.blockReason(for:)`).
    case accountBlocked(Identity, reason: BlockAccountReason)
    /// `RuntimeSettings.allowedAccounts` is set and does not list the account.
    case accountNotAllowed(Identity)
    /// The account or its tenant cannot be bound as it is: it contains a NUL character (PostgreSQL text cannot
    /// hold one), or the tenant is a registered tenant ID ending in `@`, which would read as the own tenant of a
    /// domain-less account (`svc-backup@`).
    case unrepresentableName(String)
    /// A table, column or role name that is not a plain SQL identifier (letters, digits, `_` and `$`, not
    /// starting with a digit or `$`, at most 63 bytes; a table may be qualified by one schema: `app.documents`).
    case invalidIdentifier(String)
    /// ``TenantDatabase/verify()`` has not succeeded yet on this instance: no transaction runs before the
    /// database's set-up was checked.
    case notVerified
    /// ``TenantDatabase/verify()`` found a set-up under which row-level security would not hold: the reason
    /// names what to fix (a role that is a superuser or has `BYPASSRLS`, a protected table the role owns or that
    /// is not forced, the binding functions missing or reachable).
    case unsafeConfiguration(reason: String)
    /// The database refused to bind the transaction: the runtime's ``TenantDatabase/BindingSecret`` is not the
    /// one installed (``TenantDatabase/install(on:serviceRole:secret:logger:)``).
    case bindingRefused(message: String)
    /// No connection could be made, or the connection broke during `operation`.
    case unavailable(reason: String)
    /// The server refused `operation` (`sqlState`: PostgreSQL's five-character code when it sent one).
    case queryFailed(operation: String, sqlState: String?, message: String)
    /// The body returned, but the transaction had failed inside it (a statement's error was caught and the body
    /// went on): PostgreSQL rolled it back at `COMMIT`, nothing it wrote was kept.
    case rolledBack
    /// The transaction took longer than ``TenantDatabase/transactionTimeout``: the connection was closed, the
    /// server rolled the transaction back, nothing it wrote was kept.
    case timedOut(after: Duration)

    public var description: String {
        switch self {
        case .noIdentity: "no identity: a tenant transaction needs an account"
        case .unmanagedIdentity: "the unmanaged identity (\"\") has no tenant"
        case let .policyUnavailable(reason): "policy unavailable: \(reason)"
        case let .accountBlocked(account, reason): "\(account.debugDescription) is blocked (\(reason))"
        case let .accountNotAllowed(account): "\(account.debugDescription) is not among the allowed accounts"
        case let .unrepresentableName(name): "\(String(reflecting: String(name.prefix(80)))) cannot be bound"
        case let .invalidIdentifier(name): "\(String(reflecting: String(name.prefix(80)))) is not a plain SQL identifier"
        case .notVerified: "the tenant database was not verified (call verify() at start-up)"
        case let .unsafeConfiguration(reason): "row-level security would not hold: \(reason)"
        case let .bindingRefused(message): "the database refused the identity binding: \(message)"
        case let .unavailable(reason): "the database is unavailable: \(reason)"
        case let .queryFailed(operation, sqlState, message):
            "\(operation) failed\(sqlState.map { " (SQLSTATE \($0))" } ?? ""): \(message)"
        case .rolledBack: "the transaction failed inside its body and was rolled back"
        case let .timedOut(after): "the transaction took longer than \(after) and was rolled back"
        }
    }

    /// Classifies an error from PostgresNIO the way the fleet does.
    static func from(_ error: any Error, operation: String) -> TenantDatabaseError {
        if let error = error as? TenantDatabaseError { return error }
        switch PostgresFleetError.from(error, operation: operation) {
        case let .queryFailed(operation, sqlState, message): return .queryFailed(operation: operation, sqlState: sqlState, message: message)
        case let other: return .unavailable(reason: other.description)
        }
    }
}
