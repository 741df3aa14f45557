import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Tenant isolation inside PostgreSQL: every transaction opened through it is bound to the caller's account and
/// tenant, and the tables' row-level security lets it see and write that tenant's rows only, even when the
/// service's own SQL forgets `WHERE tenant = $1`.
///
/// ```swift
/// let database = TenantDatabase(client: client, policies: policies, secret: secret,
///                               protectedTables: ["documents"])
/// try await database.verify()                      // at start-up: refuses an unsafe set-up
/// // in a request handler, running under the caller's identity:
/// let titles = try await database.withTransaction { connection in
///     try await connection.query("SELECT title FROM documents", logger: logger)   // this tenant's rows only
///         .collect().map { try $0.decode(String.self) }
/// }
/// ```
///
/// ## What a transaction does
/// ``withTransaction(isolation:_:)`` takes the caller's effective file identity (its thread identity, else the
/// process identity) and, before the database is asked, refuses with a ``TenantDatabaseError`` when there is
/// none, when it is `Identity.unmanaged`, when the `PolicyManager`'s policy source has not loaded, when the
/// account is blocked or not among the allowed accounts. Otherwise it leases a connection from the pool and
/// sends `BEGIN`, then one statement, `SELECT identity_rls.bind($1, $2, $3)` and the transaction's time limits,
/// with the canonical account, its canonical tenant (`PolicyManager.tenant(for:)`; see ``Binding``) and the
/// ``BindingSecret`` as bound parameters: the function checks the secret and sets transaction-local settings
/// with a MAC only the database can compute. Then the body runs, then `COMMIT` (`ROLLBACK` when the body throws
/// or its task is cancelled), then `SELECT identity_rls.reset_session()`. That is two round trips more than the
/// same transaction without the runtime.
///
/// ## What the body cannot do
/// The tables' policies (``rowLevelSecurity(table:tenantColumn:accountColumn:)``) compare rows with
/// `identity_rls.current_tenant()`, which returns the bound tenant only while the MAC matches the settings *and
/// this transaction*. So SQL in the body that changes the settings (`set_config`, `SET`, `SET LOCAL`, `RESET`),
/// copies them from an earlier transaction, ends the transaction and starts another, or calls
/// `identity_rls.bind` without the secret, binds nothing: it sees no protected rows at all. `SET ROLE` and
/// `SET SESSION AUTHORIZATION` to a role that could bypass the policies are refused by PostgreSQL itself, as
/// long as the service's role is a member of no such role, which ``verify()`` checks.
///
/// ## Pool hygiene
/// After every transaction, committed or not, the session is reset (settings, cursors, SQL-made prepared
/// statements, listeners, advisory locks, sequence caches, the role): the next transaction on the connection,
/// and a query through the pool outside ``withTransaction(isolation:_:)``, find nothing of it. A connection
/// that cannot be reset, or whose rollback failed, is closed, never handed back; `bind` refuses a session that
/// still carries a held cursor, an SQL-made prepared statement, a listener or a role, and another connection is
/// leased. A session keeps the names of custom settings a body made whatever is reset, so a connection of the
/// shared pool serves one tenant for its life: one that served another tenant is closed, never bound.
///
/// ## Deadline
/// Every transaction ends within ``transactionTimeout``: the server limits each statement and lock wait to it,
/// and when it has passed the runtime closes the connection and ends its backend from another connection
/// (`identity_rls.end_backend`), so that a statement that lifted its limits holds no lock past it
/// (``TenantDatabaseError/timedOut(after:)``).
///
/// ## Two modes
/// ``Isolation/rowLevelSecurity`` (``init(client:policies:secret:protectedTables:transactionTimeout:logger:)``):
/// shared tables, one service role, the policies above. ``Isolation/rolePerTenant(_:)``
/// (``init(tenantRoles:policies:secret:protectedTables:transactionTimeout:logger:)``): each tenant's
/// transactions run as its own login role over its own schema, so that what row-level security cannot hide
/// (the planner's counts, shared sequences and statistics, other sessions' activity, the role's own defaults)
/// is refused by the database's privileges. The body's code is the same in both: `withTransaction`, tables
/// named as the mode's set-up names them.
///
/// > Warning: The isolation holds against SQL, not against Swift code that holds the ``BindingSecret`` (or
/// > ``TenantRoles/secret``). Keep the secrets out of reach of request handlers, as any other credential.
public final class TenantDatabase: Sendable {
    /// The shared connection pool in ``Isolation/rowLevelSecurity`` mode; `nil` in
    /// ``Isolation/rolePerTenant(_:)`` mode, where each tenant has a pool of its own. Its role must be the
    /// service's role: no superuser, no `BYPASSRLS`, owner of no protected table (``verify()``).
    public let client: PostgresClient?
    /// How tenants are kept apart.
    public let isolation: Isolation
    /// Decides who may open a transaction and each account's tenant.
    public let policies: PolicyManager
    /// The tables ``verify()`` checks.
    public let protectedTables: [String]
    /// Where the transactions' failures are logged (none by default).
    public let logger: Logger

    /// How long a transaction may take, from `BEGIN` to `COMMIT` (``init(client:policies:secret:protectedTables:transactionTimeout:logger:)``).
    public let transactionTimeout: Duration

    let secret: BindingSecret
    let tables: [SQLTableName]
    /// The tenants' pools in ``Isolation/rolePerTenant(_:)`` mode.
    let pools: TenantPools?
    /// Which tenant each connection of the shared pool serves (``Isolation/rowLevelSecurity`` mode).
    let affinity = ConnectionAffinity()
    /// ``transactionTimeout`` in whole milliseconds (at least 1), as PostgreSQL's timeouts take it.
    let timeoutMilliseconds: Int64
    let verified = Atomic<Bool>(false)

    /// A logger that drops everything.
    static let silentLogger = Logger(label: "identity-tenant-database", factory: { _ in SwiftLogNoOpLogHandler() })

    /// - Parameters:
    ///   - client: the pool, connecting as the service's role. Run it (`client.run()`) as usual.
    ///   - policies: the `PolicyManager` that admits accounts and answers their tenants.
    ///   - secret: the secret installed with ``install(on:serviceRole:secret:logger:)``.
    ///   - protectedTables: the tables under ``rowLevelSecurity(table:tenantColumn:accountColumn:)``, for
    ///     ``verify()``.
    ///   - transactionTimeout: how long one transaction may take, body included (default 30 seconds). Each of
    ///     its statements, and each wait for a lock, is limited to it by the server (`statement_timeout`,
    ///     `lock_timeout`, `idle_in_transaction_session_timeout`, transaction-local); when it has passed the
    ///     runtime closes the connection, so that a statement still waiting fails, and the transaction ends with
    ///     ``TenantDatabaseError/timedOut(after:)``. A request blocked by another one's lock therefore fails
    ///     within this time; it never hangs.
    ///   - logger: where failures are logged.
    /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)`` for a table name that is not a plain identifier;
    ///   ``TenantDatabaseError/unsafeConfiguration(reason:)`` for a timeout that is not positive.
    public convenience init(
        client: PostgresClient, policies: PolicyManager, secret: BindingSecret, protectedTables: [String],
        transactionTimeout: Duration = .seconds(30), logger: Logger? = nil
    ) throws(TenantDatabaseError) {
        try self.init(
            isolation: .rowLevelSecurity, client: client, policies: policies, secret: secret,
            protectedTables: protectedTables, transactionTimeout: transactionTimeout, logger: logger)
    }

    /// A tenant database in ``Isolation/rolePerTenant(_:)`` mode: each tenant's transactions run as its own login
    /// role, on a pool of its own, over its own schema (``provision(_:roles:tables:on:logger:)``).
    ///
    /// - Parameters:
    ///   - tenantRoles: where the tenants' roles connect and how their names and passwords are derived.
    ///   - policies: the `PolicyManager` that admits accounts and answers their tenants.
    ///   - secret: the secret installed with ``install(on:serviceRole:secret:logger:)``; the transactions are
    ///     bound as in the other mode, so that per-account policies in a tenant's schema hold too.
    ///   - protectedTables: the tables each tenant's schema holds, unqualified (`documents`): a body names them
    ///     so, and its `search_path` is its tenant's schema.
    ///   - transactionTimeout: as in ``init(client:policies:secret:protectedTables:transactionTimeout:logger:)``.
    ///   - logger: where failures are logged.
    /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)`` for a table name that is not a plain, unqualified
    ///   identifier; ``TenantDatabaseError/unsafeConfiguration(reason:)`` for a timeout that is not positive.
    public convenience init(
        tenantRoles: TenantRoles, policies: PolicyManager, secret: BindingSecret, protectedTables: [String],
        transactionTimeout: Duration = .seconds(30), logger: Logger? = nil
    ) throws(TenantDatabaseError) {
        for table in protectedTables where try SQLTableName(table).schema != nil { throw .invalidIdentifier(table) }
        try self.init(
            isolation: .rolePerTenant(tenantRoles), client: nil, policies: policies, secret: secret,
            protectedTables: protectedTables, transactionTimeout: transactionTimeout, logger: logger)
    }

    private init(
        isolation: Isolation, client: PostgresClient?, policies: PolicyManager, secret: BindingSecret,
        protectedTables: [String], transactionTimeout: Duration, logger: Logger?
    ) throws(TenantDatabaseError) {
        var tables: [SQLTableName] = []
        for table in protectedTables { tables.append(try SQLTableName(table)) }
        let (seconds, attoseconds) = transactionTimeout.components
        guard transactionTimeout > .zero, seconds < 1_000_000_000 else {
            throw .unsafeConfiguration(reason: "a transaction timeout is positive and finite, not \(transactionTimeout)")
        }
        self.transactionTimeout = transactionTimeout
        self.timeoutMilliseconds = max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        self.isolation = isolation
        self.client = client
        let logger = logger ?? Self.silentLogger
        if case let .rolePerTenant(roles) = isolation {
            pools = TenantPools(roles: roles, logger: logger)
        } else {
            pools = nil
        }
        self.policies = policies
        self.secret = secret
        self.protectedTables = protectedTables
        self.tables = tables
        self.logger = logger
    }

    /// Whether ``verify()`` has succeeded on this instance.
    public var isVerified: Bool { verified.load(ordering: .acquiring) }

    /// What a transaction is bound to: the values `identity_rls.current_account()` and
    /// `identity_rls.current_tenant()` return inside it.
    ///
    /// The bound names are canonical: case-folded as `Identity` compares names, then in Unicode normalization
    /// form C, so that every spelling two `Identity` (or `TenantID`) values treat as equal (`bücher.example`
    /// composed or decomposed) binds the same string and sees the same rows.
    public struct Binding: Sendable, Hashable {
        /// The caller's account.
        public let account: Identity
        /// The account's tenant (`PolicyManager.tenant(for:)`).
        public let tenant: TenantID
        /// The account as bound: its case-folded name (`Identity.foldedName`) in normalization form C.
        public let boundAccount: String
        /// The tenant as bound: its case-folded name in normalization form C.
        public let boundTenant: String
    }

    /// The binding a transaction opened now by the caller would get (its effective file identity), or the
    /// refusal: the checks ``withTransaction(isolation:_:)`` makes before it asks the database.
    public func currentBinding() throws(TenantDatabaseError) -> Binding {
        try binding(for: IdentityContext.effectiveFileIdentity)
    }

    /// The binding a transaction opened now under `identity` would get, or the refusal (see
    /// ``TenantDatabaseError``): no identity, `Identity.unmanaged`, an unloaded policy source, a blocked or
    /// disallowed account, a name PostgreSQL cannot hold.
    public func binding(for identity: Identity?) throws(TenantDatabaseError) -> Binding {
        guard let account = identity else { throw .noIdentity }
        guard !account.isUnmanaged else { throw .unmanagedIdentity }
        // The same rule as every protected read and write: undecided before the source loads, refused when
        // blocked.
        switch policies.refusal(of: .create, to: account) {
        case nil: break
        case let .policyUnavailable(reason)?: throw .policyUnavailable(reason: reason)
        case .accountBlocked?: throw .accountBlocked(account, reason: policies.blockReason(for: account))
        case let other?: throw .policyUnavailable(reason: other.description)
        }
        if let allowed = policies.settings.allowedAccounts, !allowed.contains(account) {
            throw .accountNotAllowed(account)
        }
        let tenant = policies.tenant(for: account)
        // A domain-less account's own tenant ("svc@") equals no tenant made from a string; a registered tenant
        // ID spelled the same way would share its rows, so it is refused rather than bound.
        if tenant == TenantID(tenant.rawValue), tenant.rawValue.hasSuffix("@") {
            throw .unrepresentableName(tenant.rawValue)
        }
        let boundAccount = Self.canonical(account)
        let boundTenant = Self.canonical(Identity(tenant.rawValue))
        for name in [boundAccount, boundTenant] where name.utf8.contains(0) || name.isEmpty {
            throw .unrepresentableName(name)
        }
        return Binding(account: account, tenant: tenant, boundAccount: boundAccount, boundTenant: boundTenant)
    }

    /// The one spelling of an identity's name that PostgreSQL compares: `Identity` compares case-folded names
    /// under canonical equivalence, PostgreSQL compares bytes, so the folded name is put in normalization form C.
    static func canonical(_ identity: Identity) -> String {
        let folded = identity.foldedName
        if folded.utf8.allSatisfy({ $0 < 0x80 }) { return folded }
        return folded.precomposedStringWithCanonicalMapping
    }

    /// Runs `body` with a connection inside a transaction bound to the caller's effective identity and its
    /// tenant; commits when it returns, rolls back when it throws or its task is cancelled.
    ///
    /// - Refused before the database is asked (``currentBinding()``): no identity, `Identity.unmanaged`, policy
    ///   source not loaded, a blocked or disallowed account, a name PostgreSQL cannot hold; and before
    ///   ``verify()`` succeeded, ``TenantDatabaseError/notVerified``.
    /// - Round trips: `BEGIN`, the binding, the body's, `COMMIT`, the session reset.
    /// - Ends within ``transactionTimeout``, with ``TenantDatabaseError/timedOut(after:)`` when the body takes
    ///   longer.
    /// - A connection that is already closed when leased, or still holds a cursor `WITH HOLD` of an earlier
    ///   transaction (closed then, not bound), is given back and
    ///   another is leased (at most ``maximumLeases`` in all, then ``TenantDatabaseError/unavailable(reason:)``).
    /// - The body must not keep the connection, nor use it from another task after it returns.
    ///
    /// - Returns: what `body` returned, once the transaction committed.
    /// - Throws: a ``TenantDatabaseError`` for a refusal, a failed `BEGIN`, binding or `COMMIT`, and
    ///   ``TenantDatabaseError/rolledBack`` when the body swallowed a failed statement (PostgreSQL then answers
    ///   `COMMIT` with a rollback); the body's own error, after the rollback, when it threw; `CancellationError`
    ///   when its task was cancelled and the body returned anyway (rolled back).
    public func withTransaction<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        let binding = try currentBinding()
        guard isVerified else { throw TenantDatabaseError.notVerified }
        let client: PostgresClient
        let lease: TenantPools.Lease?
        if let pools {
            let tenantLease = try pools.acquire(binding.tenant)
            lease = tenantLease
            client = tenantLease.client
        } else {
            lease = nil
            client = self.client!
        }
        // Set once this lease's pool had its role checked; handed back with the lease.
        let checked = RoleCheck(done: lease?.isVerified ?? true)
        defer { if let lease { pools?.release(lease, verified: checked.isDone) } }
        do {
            // A connection that still holds an earlier transaction's cursor, or that served another tenant, is
            // closed and another one is leased; a pool handing out nothing else is unavailable.
            var staleLeases = 0
            var foreignLeases = 0
            while staleLeases < Self.maximumLeases, foreignLeases < Self.maximumForeignLeases {
                do {
                    return try await client.withConnection(isolation: isolation) { connection in
                        // The pool may hand out a connection the server closed a moment ago, before it noticed:
                        // lease another rather than fail the transaction.
                        if connection.isClosed { throw StaleConnection() }
                        if lease == nil, !self.affinity.claim(connection, for: binding.boundTenant) {
                            await self.close(connection)
                            throw ForeignConnection()
                        }
                        if !checked.isDone, let lease {
                            // A tenant's pool serves nothing before its role's privileges are checked.
                            try await self.verifyTenantRole(lease.role, on: connection)
                            checked.markDone()
                        }
                        return try await self.run(
                            on: connection, client: client, binding: binding, schema: lease?.role, isolation: isolation, body)
                    }
                } catch is StaleConnection {
                    staleLeases += 1
                } catch is ForeignConnection {
                    foreignLeases += 1
                }
            }
            throw TransactionStep(error: .unavailable(
                reason: staleLeases == Self.maximumLeases
                    ? "every connection leased was closed or held a cursor of an earlier transaction"
                    : "every connection leased had served another tenant"))
        } catch let error as TransactionStep {
            throw error.error
        } catch let error as BodyFailure {
            throw error.error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // Only the pool throws unwrapped errors: no connection could be leased.
            throw TenantDatabaseError.from(error, operation: "leasing a connection")
        }
    }

    /// An error of the transaction's own steps (`BEGIN`, the binding, `COMMIT`), told apart from the body's
    /// errors and from the pool's.
    private struct TransactionStep: Error {
        let error: TenantDatabaseError
    }

    /// How many connections one transaction leases at most while the ones it gets hold stale cursors.
    public static let maximumLeases = 4

    /// The connection was closed when leased, or the binding found a cursor of an earlier transaction on it (it
    /// was closed then): lease another.
    private struct StaleConnection: Error {}

    /// How many connections that served another tenant one transaction closes at most before it gives up
    /// (``TenantDatabaseError/unavailable(reason:)``); each one closed makes the pool open a fresh one.
    public static let maximumForeignLeases = 64

    /// The connection had served another tenant: it was closed, lease another.
    private struct ForeignConnection: Error {}

    /// The body's error (or the cancellation that stopped the commit), passed on as it is.
    private struct BodyFailure: Error {
        let error: any Error
    }

    /// One transaction on a leased connection, under the deadline, and the session reset after it, whatever its
    /// outcome: the connection goes back to the pool clean, or closed.
    private func run<Result>(
        on connection: PostgresConnection, client: PostgresClient, binding: Binding, schema: String?,
        isolation: isolated (any Actor)?, _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        let deadline = Deadline(closing: connection, after: .nanoseconds(timeoutMilliseconds * 1_000_000)) { backend in
            self.endBackend(backend, through: client)
        }
        defer { deadline.cancel() }
        let value: Result
        do {
            value = try await transaction(
                on: connection, binding: binding, schema: schema, deadline: deadline, isolation: isolation, body)
        } catch is StaleConnection {
            throw StaleConnection()
        } catch {
            await resetSession(connection)
            // The deadline closed the connection: whatever failed after it failed because of it.
            if deadline.hasPassed { throw TransactionStep(error: .timedOut(after: transactionTimeout)) }
            throw error
        }
        await resetSession(connection)
        return value
    }

    /// Ends `backend` from another connection of `client` (`identity_rls.end_backend`, with the secret): a
    /// statement can ignore every limit its own session sets and outlive the connection's close, holding its
    /// locks. Runs on its own; a backend already gone is not an error.
    private func endBackend(_ backend: Int32, through client: PostgresClient) {
        let secret = ByteBuffer(bytes: secret.bytes)
        let logger = logger
        Task {
            do {
                try await client.withConnection { connection in
                    try await connection.perform("SELECT identity_rls.end_backend(\(backend), \(secret))", logger: logger)
                }
            } catch {
                logger.warning("ending a backend past its deadline failed", metadata: ["error": "\(String(reflecting: error))"])
            }
        }
    }

    /// Clears what the body may have left in the session (``installationStatements(serviceRole:)``:
    /// `identity_rls.reset_session()`); a connection that cannot be reset is closed, never handed back.
    private func resetSession(_ connection: PostgresConnection) async {
        guard !connection.isClosed else { return }
        do {
            try await connection.perform("SELECT identity_rls.reset_session()", logger: logger)
        } catch {
            logger.warning("resetting the session failed; closing the connection", metadata: ["error": "\(String(reflecting: error))"])
            await close(connection)
        }
    }

    private func transaction<Result>(
        on connection: PostgresConnection, binding: Binding, schema: String?, deadline: Deadline,
        isolation: isolated (any Actor)?,
        _ body: (PostgresConnection) async throws -> sending Result
    ) async throws -> sending Result {
        do {
            // READ WRITE: a default the role set for itself (default_transaction_read_only) does not stop the
            // service's writes.
            try await connection.perform("BEGIN READ WRITE", logger: logger)
        } catch {
            // Unless the server refused it, BEGIN may have run: the connection is not handed back.
            if (error as? PSQLError)?.code != .server { await close(connection) }
            throw TransactionStep(error: .from(error, operation: "BEGIN"))
        }
        // From here on, every way out but a successful COMMIT rolls back.
        do {
            deadline.backend = try await bind(connection, binding, schema: schema)
        } catch .stale {
            await rollBack(connection)
            await close(connection)
            throw StaleConnection()
        } catch let .refused(error) {
            await rollBack(connection)
            throw TransactionStep(error: error)
        }
        let value: Result
        do {
            value = try await body(connection)
        } catch {
            await rollBack(connection)
            throw BodyFailure(error: error)
        }
        // A cancelled request does not commit what its body did, even when the body did not notice.
        if Task.isCancelled {
            await rollBack(connection)
            throw BodyFailure(error: CancellationError())
        }
        let command: String
        do {
            try connection.checkOpen()
            command = try await connection.query("COMMIT", logger: logger) { _ in }.get().command
        } catch {
            // After a server's refusal (a deferred constraint, a serialization failure) the server has ended
            // the transaction; after anything else the connection's state is unknown: it is closed, so that the
            // pool never hands out a connection still inside this transaction.
            if (error as? PSQLError)?.code != .server { await close(connection) }
            throw TransactionStep(error: .from(error, operation: "COMMIT"))
        }
        // PostgreSQL answers COMMIT of a transaction that failed (a statement's error the body caught) with
        // ROLLBACK and no error: nothing was kept, and the caller must hear it.
        guard command == "COMMIT" else { throw TransactionStep(error: .rolledBack) }
        return value
    }

    /// Why the binding failed.
    private enum BindingFailure: Error {
        /// The connection holds a cursor `WITH HOLD` of an earlier transaction.
        case stale
        case refused(TenantDatabaseError)
    }

    /// The one round trip that binds the transaction: the secret, the account and the tenant as parameters,
    /// and the server's limits for this transaction (``transactionTimeout``; the server checks every second
    /// whether the client is still there, so a statement outlives a closed connection by a second at most).
    /// In ``Isolation/rolePerTenant(_:)`` mode the tenant's schema becomes the transaction's `search_path`.
    /// Every function is qualified: a `search_path` the role's own defaults name cannot put another in its place.
    /// - Returns: the backend's process ID, for ``endBackend(_:through:)``.
    private func bind(_ connection: PostgresConnection, _ binding: Binding, schema: String?) async throws(BindingFailure) -> Int32 {
        let secret = ByteBuffer(bytes: secret.bytes)
        let timeout = String(timeoutMilliseconds)
        let check = String(min(timeoutMilliseconds, 1000))
        // The schema's name is a plain identifier (TenantRoles.name(for:)); pg_catalog stays first, as always.
        // Without one (row-level-security mode) the search_path is left as it is.
        let searchPath = schema.map { "\"\($0)\"" }
        do {
            try connection.checkOpen()
            let rows = try await connection.query("""
                SELECT identity_rls.bind(\(binding.boundAccount), \(binding.boundTenant), \(secret)),
                       pg_catalog.set_config('statement_timeout', \(timeout), true),
                       pg_catalog.set_config('lock_timeout', \(timeout), true),
                       pg_catalog.set_config('idle_in_transaction_session_timeout', \(timeout), true),
                       pg_catalog.set_config('client_connection_check_interval', \(check), true),
                       pg_catalog.set_config('search_path',
                           coalesce(\(searchPath), pg_catalog.current_setting('search_path')), true),
                       pg_catalog.pg_backend_pid()
                """, logger: logger)
            var backend: Int32 = 0
            for try await row in rows.decode((Bool, String, String, String, String, String, Int32).self) {
                backend = row.6
            }
            return backend
        } catch {
            let refused = TenantDatabaseError.from(error, operation: "binding the transaction")
            if case let .queryFailed(_, sqlState, message) = refused {
                if sqlState == "55000" { throw .stale }
                if sqlState == "42501" || sqlState == "42883" || sqlState == "3F000" {
                    // Insufficient privilege (a wrong secret, or no EXECUTE), or the function or schema missing.
                    throw .refused(.bindingRefused(message: message))
                }
            }
            throw .refused(refused)
        }
    }

    /// Rolls back; a connection whose rollback failed may still be inside the bound transaction, so it is
    /// closed rather than returned to the pool.
    private func rollBack(_ connection: PostgresConnection) async {
        do {
            try await connection.perform("ROLLBACK", logger: logger)
        } catch {
            logger.warning("ROLLBACK failed; closing the connection", metadata: ["error": "\(String(reflecting: error))"])
            await close(connection)
        }
    }

    private func close(_ connection: PostgresConnection) async {
        do {
            try await connection.close()
        } catch {
            // Closing a connection that is already closed fails: either way it is not used again.
            logger.debug("closing the connection failed", metadata: ["error": "\(String(reflecting: error))"])
        }
    }
}

/// Whether a tenant's pool had its role checked during one `withTransaction` call.
private final class RoleCheck: Sendable {
    private let done: Atomic<Bool>

    init(done: Bool) {
        self.done = Atomic(done)
    }

    var isDone: Bool { done.load(ordering: .acquiring) }

    func markDone() { done.store(true, ordering: .releasing) }
}

/// Closes a connection when a transaction's time is up, and has its backend ended from another connection;
/// cancelled when the transaction ends first.
private final class Deadline: Sendable {
    private let state: State
    private let scheduled: Scheduled<Void>

    private final class State: Sendable {
        let passed = Atomic<Bool>(false)
        /// The backend's process ID once the binding returned it; 0 before.
        let backend = Atomic<Int32>(0)
    }

    init(closing connection: PostgresConnection, after timeout: TimeAmount, ending: @escaping @Sendable (Int32) -> Void) {
        let state = State()
        self.state = state
        scheduled = connection.eventLoop.scheduleTask(in: timeout) {
            state.passed.store(true, ordering: .releasing)
            connection.close().whenComplete { _ in }
            let backend = state.backend.load(ordering: .acquiring)
            if backend != 0 { ending(backend) }
        }
    }

    /// The backend the transaction runs on.
    var backend: Int32 {
        get { state.backend.load(ordering: .acquiring) }
        set { state.backend.store(newValue, ordering: .releasing) }
    }

    /// Whether the time was up (and the connection closed) before ``cancel()``.
    var hasPassed: Bool { state.passed.load(ordering: .acquiring) }

    func cancel() { scheduled.cancel() }
}

extension PostgresConnection {
    /// Runs `query` and reads its answer to the end: a statement's error can arrive after its first rows (an
    /// exception raised by a function), and is only seen by reading them.
    func perform(_ query: PostgresQuery, logger: Logger) async throws {
        try checkOpen()
        for try await _ in try await self.query(query, logger: logger) {}
    }

    /// Refuses a connection that is already closed (the server went away): postgres-nio 1.33 never answers a
    /// query written to a closed connection, so it is not sent.
    func checkOpen() throws(TenantDatabaseError) {
        if isClosed { throw .unavailable(reason: "the connection to the database closed") }
    }
}
