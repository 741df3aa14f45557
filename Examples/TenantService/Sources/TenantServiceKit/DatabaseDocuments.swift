import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import Logging
import PostgresNIO
import Synchronization

/// The document service's second store: documents in PostgreSQL, in one table that every tenant shares, kept
/// apart by the database itself (IdentityPostgres's `TenantDatabase`: row-level security bound to the caller's
/// effective identity).
///
/// ```swift
/// let documents = try DatabaseDocuments(server: PostgresFleetConfiguration.fromEnvironment()!, policies: policies)
/// try await documents.provision()                  // as the administrator: a database, two roles, the table
/// Task { await documents.run() }                   // the service role's pool
/// try await documents.verify()                     // refuses to serve under a set-up RLS would not hold in
/// // in a handler, under the caller's identity (the middleware bound it):
/// let rows = try await documents.list()            // SELECT tenant, account, name FROM tenant_docs.documents
/// ```
///
/// ## Set-up
/// ``provision()`` connects as `server`'s role (the administrator: a superuser, such as the `postgres` role of
/// `Integrations/IdentityPostgres/scripts/with-postgres.sh`), creates a database and two roles of its own, and,
/// as the owner role, the binding schema (`TenantDatabase.install`) and ``table``:
///
/// ```sql
/// CREATE TABLE tenant_docs.documents (
///     tenant  text NOT NULL DEFAULT identity_rls.current_tenant(),
///     account text NOT NULL DEFAULT identity_rls.current_account(),
///     name    text NOT NULL,
///     body    text NOT NULL,
///     PRIMARY KEY (tenant, account, name))
/// ```
///
/// under `TenantDatabase.rowLevelSecurity(table:tenantColumn:)`: a transaction reads its tenant's rows, so
/// colleagues share documents, and writes rows of its tenant only. Two restrictive policies of the example's own
/// narrow writes further: an `INSERT` or `UPDATE` touches the caller's own rows only. The service role logs in,
/// owns nothing, is no superuser, has no `BYPASSRLS`, may not create temporary tables or large objects nor
/// signal backends, nor read other sessions' activity and statistics (`TenantDatabase.hardeningStatements`), is a
/// member of no role, and holds `SELECT`,
/// `INSERT` and `UPDATE` on the table (no `DELETE`, no `TRUNCATE`). The names of the database and roles are
/// made here from a random suffix (``databaseName``), never from a request; the schema, table and column names
/// are constants.
///
/// ## Queries
/// ``put(name:body:)``, ``get(owner:name:)`` and ``list()`` each run in one `TenantDatabase.withTransaction`, with
/// every value a bound parameter. None of them names a tenant: ``get(owner:name:)`` asks by account and name,
/// ``list()`` has no `WHERE` at all, and the database answers the caller's tenant's rows only.
///
/// > Note: Every refusal is a `TenantDatabaseError`. No identity, `""`, a blocked or disallowed account and an
/// > unloaded policy source are refused before a connection is leased; before ``verify()`` succeeded every call
/// > is refused (`notVerified`).
public final class DatabaseDocuments: Sendable {
    /// The table, schema-qualified.
    public static let table = "tenant_docs.documents"

    /// The database ``provision()`` creates and ``drop()`` removes.
    public let databaseName: String
    /// The role that owns the binding schema and ``table`` (it does not log in).
    public let ownerRole: String
    /// The role the pool logs in as.
    public let serviceRole: String
    /// The tenant-bound transactions, over the service role's pool.
    public let database: TenantDatabase

    let server: PostgresFleetConfiguration
    let client: PostgresClient
    let logger: Logger
    private let secret: TenantDatabase.BindingSecret
    private let password: String
    private let state = Mutex(State.new)

    private enum State {
        case new, provisioning, provisioned, dropped
    }

    /// A store on `server` (no connection is made yet: see ``provision()``).
    ///
    /// - Parameters:
    ///   - server: where PostgreSQL runs, and the administrator role to set it up with
    ///     (`PostgresFleetConfiguration.fromEnvironment()` reads libpq's `PGHOST`, `PGPORT`, `PGUSER`, ...).
    ///   - policies: the document service's `PolicyManager`: it admits accounts and answers their tenants.
    ///   - maximumConnections: the service role's pool size.
    ///   - tls: TLS from the pool to the server.
    ///   - logger: where the pool and the transactions log.
    public init(
        server: PostgresFleetConfiguration, policies: PolicyManager, maximumConnections: Int = 16,
        tls: PostgresClient.Configuration.TLS = .disable, logger: Logger? = nil
    ) throws {
        let suffix = Self.randomHex(count: 16)
        databaseName = "tenant_docs_\(suffix)"
        ownerRole = "tenant_docs_owner_\(suffix)"
        serviceRole = "tenant_docs_service_\(suffix)"
        password = Self.randomHex(count: 32)
        secret = TenantDatabase.BindingSecret.generate()
        self.server = server
        let logger = logger ?? Logger(label: "tenant-docs-database") { _ in SwiftLogNoOpLogHandler() }
        self.logger = logger
        var configuration = PostgresClient.Configuration(
            host: server.host, port: server.port, username: serviceRole, password: password, database: databaseName,
            tls: tls)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .milliseconds(Int64(max(server.connectTimeout, 0.001) * 1000))
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        database = try TenantDatabase(
            client: client, policies: policies, secret: secret, protectedTables: [Self.table], logger: logger)
    }

    /// `count` lowercase hexadecimal digits from the system's secure generator: the only characters the generated
    /// role and database names and the service role's password contain.
    static func randomHex(count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef")
        return String((0..<count).map { _ in digits[Int.random(in: 0..<16, using: &generator)] })
    }

    // MARK: - Set-up and tear-down

    /// Creates the roles, the database, the binding schema and ``table`` with its policies, as the administrator
    /// (`server`'s role). Once per instance; a second call does nothing.
    public func provision() async throws {
        let first = state.withLock { state -> Bool in
            guard case .new = state else { return false }
            state = .provisioning
            return true
        }
        guard first else { return }
        do {
            try await create()
        } catch {
            // Whatever was made before the failure is removed by drop(), as after a success.
            state.withLock { $0 = .provisioned }
            throw error
        }
        state.withLock { $0 = .provisioned }
    }

    private func create() async throws {
        let owner = ownerRole, service = serviceRole, databaseName = databaseName
        try await administrator(database: server.database) { connection in
            try await connection.run("CREATE ROLE \(owner) NOLOGIN")
            try await connection.run("""
                CREATE ROLE \(service) LOGIN PASSWORD '\(password)' NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB \
                NOREPLICATION
                """)
            try await connection.run("CREATE DATABASE \(databaseName)")
        }
        try await administrator(database: databaseName) { connection in
            // Temporary tables and large objects outlive the transaction, backend signals, other sessions' activity
            // and the tables' statistics reach other tenants' requests: TenantDatabase.verify() refuses a service
            // role that may use them.
            for statement in try TenantDatabase.hardeningStatements(database: databaseName, owner: owner) {
                try await connection.run(statement)
            }
            try await connection.run("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            try await connection.run("GRANT CREATE ON DATABASE \(databaseName) TO \(owner)")
            try await connection.run("SET ROLE \(owner)")
            try await TenantDatabase.install(on: connection, serviceRole: service, secret: secret, logger: logger)
            try await connection.run("CREATE SCHEMA tenant_docs")
            try await connection.run("GRANT USAGE ON SCHEMA tenant_docs TO \(service)")
            try await connection.run("""
                CREATE TABLE tenant_docs.documents (
                    tenant text NOT NULL DEFAULT identity_rls.current_tenant(),
                    account text NOT NULL DEFAULT identity_rls.current_account(),
                    name text NOT NULL,
                    body text NOT NULL,
                    PRIMARY KEY (tenant, account, name))
                """)
            try await connection.run("BEGIN")
            for statement in try TenantDatabase.rowLevelSecurity(table: Self.table, tenantColumn: "tenant") + Self.ownWrites {
                try await connection.run(statement)
            }
            try await connection.run("COMMIT")
            try await connection.run("GRANT SELECT, INSERT, UPDATE ON tenant_docs.documents TO \(service)")
            try await connection.run("RESET ROLE")
        }
    }

    /// The example's own restrictive policies: ANDed with the tenant's, they let an `INSERT` or an `UPDATE` touch
    /// the caller's own rows only (reads stay tenant-wide, so colleagues share).
    static let ownWrites = [
        "DROP POLICY IF EXISTS tenant_docs_own_insert ON tenant_docs.documents",
        """
        CREATE POLICY tenant_docs_own_insert ON tenant_docs.documents AS RESTRICTIVE FOR INSERT TO PUBLIC
            WITH CHECK (account = (SELECT identity_rls.current_account()))
        """,
        "DROP POLICY IF EXISTS tenant_docs_own_update ON tenant_docs.documents",
        """
        CREATE POLICY tenant_docs_own_update ON tenant_docs.documents AS RESTRICTIVE FOR UPDATE TO PUBLIC
            USING (account = (SELECT identity_rls.current_account()))
            WITH CHECK (account = (SELECT identity_rls.current_account()))
        """,
    ]

    /// Runs the service role's pool until the task is cancelled (as `PostgresClient.run()`; once).
    public func run() async {
        await client.run()
    }

    /// Checks that row-level security holds for the service role (`TenantDatabase.verify()`); until it succeeds,
    /// every call is refused. Needs ``run()`` running.
    public func verify() async throws(TenantDatabaseError) {
        try await database.verify()
    }

    /// Removes the database and the two roles (as the administrator), when ``provision()`` made them.
    public func drop() async throws {
        let provisioned = state.withLock { state -> Bool in
            guard case .provisioned = state else { return false }
            state = .dropped
            return true
        }
        guard provisioned else { return }
        let owner = ownerRole, service = serviceRole, databaseName = databaseName
        try await administrator(database: server.database) { connection in
            try await connection.run("DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)")
            try await connection.run("DROP ROLE IF EXISTS \(service)")
            try await connection.run("DROP ROLE IF EXISTS \(owner)")
        }
    }

    /// Runs `body` on a connection of the administrator's to `database`.
    private func administrator(
        database: String?, _ body: (PostgresConnection) async throws -> Void
    ) async throws {
        var configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: server.username, password: server.password,
            database: database, tls: server.tls)
        configuration.options.connectTimeout = .milliseconds(Int64(max(server.connectTimeout, 0.001) * 1000))
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            try await body(connection)
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }

    // MARK: - Documents, under the caller's identity

    /// Stores `body` as the caller's document `name` (a new one, or a new body for the caller's own). The
    /// database fills in the tenant and the account from the transaction's binding.
    /// - Returns: the row as stored: its tenant, account and name.
    public func put(name: String, body: String) async throws(TenantDatabaseError) -> DatabaseRow {
        let rows = try await transaction(operation: "storing a document") { connection, logger in
            try await connection.query("""
                INSERT INTO tenant_docs.documents (name, body) VALUES (\(name), \(body))
                ON CONFLICT (tenant, account, name) DO UPDATE SET body = excluded.body
                RETURNING tenant, account, name
                """, logger: logger).decodeRows()
        }
        guard let row = rows.first else {
            throw .queryFailed(operation: "storing a document", sqlState: nil, message: "no row was returned")
        }
        return row
    }

    /// `owner`'s document `name`, asked by account and name only: no tenant in the query. Another tenant's
    /// document is not among the rows the database answers, so it is `nil`, as one that does not exist.
    public func get(owner: Identity, name: String) async throws(TenantDatabaseError) -> (row: DatabaseRow, body: String)? {
        let rows = try await transaction(operation: "reading a document") { connection, logger in
            var rows: [(row: DatabaseRow, body: String)] = []
            let sequence = try await connection.query("""
                SELECT tenant, account, name, body FROM tenant_docs.documents
                WHERE account = \(owner.foldedName) AND name = \(name)
                """, logger: logger)
            for try await (tenant, account, name, body) in sequence.decode((String, String, String, String).self) {
                rows.append((DatabaseRow(tenant: tenant, account: account, name: name), body))
            }
            return rows
        }
        return rows.first
    }

    /// Every row the database answers to a query with no `WHERE` at all:
    ///
    /// ```sql
    /// SELECT tenant, account, name FROM tenant_docs.documents
    /// ```
    ///
    /// Under row-level security that is the caller's tenant's rows, and only those.
    public func list() async throws(TenantDatabaseError) -> [DatabaseRow] {
        try await transaction(operation: "listing documents") { connection, logger in
            try await connection.query("SELECT tenant, account, name FROM tenant_docs.documents", logger: logger)
                .decodeRows()
        }
    }

    /// `body` in one tenant-bound transaction; every error as a `TenantDatabaseError`.
    private func transaction<T: Sendable>(
        operation: String, _ body: (PostgresConnection, Logger) async throws -> T
    ) async throws(TenantDatabaseError) -> T {
        do {
            return try await database.withTransaction { connection in try await body(connection, logger) }
        } catch let error as TenantDatabaseError {
            throw error
        } catch let error as PSQLError {
            // The server's message, not the query's values: the problem report shows it to the caller.
            throw .queryFailed(
                operation: operation, sqlState: error.serverInfo?[.sqlState],
                message: error.serverInfo?[.message] ?? "\(error.code)")
        } catch is CancellationError {
            throw .unavailable(reason: "the request was cancelled: \(operation) rolled back")
        } catch {
            throw .queryFailed(operation: operation, sqlState: nil, message: String(describing: error))
        }
    }
}

/// A row of ``DatabaseDocuments/table`` as the database answered it (its body left out).
public struct DatabaseRow: Codable, Sendable, Hashable {
    /// The row's tenant, as the binding filled it in: the case-folded tenant ID.
    public var tenant: String
    /// The row's account, as the binding filled it in: the case-folded account name.
    public var account: String
    /// The document's name, as stored.
    public var name: String

    public init(tenant: String, account: String, name: String) {
        self.tenant = tenant
        self.account = account
        self.name = name
    }
}

extension PostgresRowSequence {
    /// The rows' `(tenant, account, name)` columns.
    func decodeRows() async throws -> [DatabaseRow] {
        var rows: [DatabaseRow] = []
        for try await (tenant, account, name) in decode((String, String, String).self) {
            rows.append(DatabaseRow(tenant: tenant, account: account, name: name))
        }
        return rows
    }
}

extension PostgresConnection {
    /// Runs one of ``DatabaseDocuments``' set-up statements (constants and generated names only, never a value
    /// from a request) and reads its answer to the end.
    fileprivate func run(_ sql: String) async throws {
        for try await _ in try await query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "tenant-docs-setup") { _ in SwiftLogNoOpLogHandler() }) {}
    }
}
