import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import Logging
import PostgresNIO
import Testing

/// A database of its own with the tenant isolation installed: an owner role (owns the binding schema and the
/// tables), a service role (logs in, owns nothing, no BYPASSRLS), and a `TenantDatabase` over a pool of the
/// service role. Tables:
/// - `app.documents (id, tenant, body)`: rows shared by a tenant;
/// - `app.notes (id, tenant, account, body)`: rows of one account.
/// Both fill `tenant` and `account` from the binding by default.
final class TenantFixture: Sendable {
    let configuration: PostgresFleetConfiguration
    let owner: String
    let service: String
    let secret: TenantDatabase.BindingSecret
    let client: PostgresClient
    let policies: PolicyManager
    let database: TenantDatabase
    private let runner: Task<Void, Never>

    static let tables = ["app.documents", "app.notes"]

    /// A new fixture; `verify` runs `TenantDatabase.verify()` before it returns.
    static func make(
        policies: PolicyManager = PolicyManager(), maximumConnections: Int = 4, verify: Bool = true
    ) async throws -> TenantFixture {
        let configuration = try await TestDatabase.make()
        let databaseName = try #require(configuration.database)
        let suffix = databaseName.dropFirst("identity_test_".count)
        let owner = "rls_owner_\(suffix)"
        let service = "rls_service_\(suffix)"
        let secret = TenantDatabase.BindingSecret.generate()
        try await TestDatabase.admin { connection in
            try await connection.run(sql: "CREATE ROLE \(owner) NOLOGIN")
            try await connection.run(sql: "CREATE ROLE \(service) LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB")
        }
        try await TestDatabase.admin(configuration) { connection in
            // Temporary tables, large objects, backend signals and other sessions' SQL text reach past a
            // transaction: TenantDatabase.verify() refuses a role that may use them.
            for statement in try TenantDatabase.hardeningStatements(database: databaseName, owner: owner) {
                try await connection.run(sql: statement)
            }
            try await connection.run(sql: "GRANT CREATE ON DATABASE \(databaseName) TO \(owner)")
            try await connection.run(sql: "SET ROLE \(owner)")
            try await TenantDatabase.install(on: connection, serviceRole: service, secret: secret, logger: TestDatabase.logger)
            try await connection.run(sql: "CREATE SCHEMA app")
            try await connection.run(sql: "GRANT USAGE ON SCHEMA app TO \(service)")
            try await connection.run(sql: """
                CREATE TABLE app.documents (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    tenant text NOT NULL DEFAULT identity_rls.current_tenant(),
                    body text NOT NULL)
                """)
            try await connection.run(sql: """
                CREATE TABLE app.notes (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    tenant text NOT NULL DEFAULT identity_rls.current_tenant(),
                    account text NOT NULL DEFAULT identity_rls.current_account(),
                    body text NOT NULL)
                """)
            try await connection.run(sql: "BEGIN")
            for statement in try TenantDatabase.rowLevelSecurity(table: "app.documents", tenantColumn: "tenant")
                + TenantDatabase.rowLevelSecurity(table: "app.notes", tenantColumn: "tenant", accountColumn: "account") {
                try await connection.run(sql: statement)
            }
            try await connection.run(sql: "COMMIT")
            try await connection.run(sql: "GRANT SELECT, INSERT, UPDATE, DELETE ON app.documents, app.notes TO \(service)")
            try await connection.run(sql: "GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO \(service)")
        }
        var settings = PostgresClient.Configuration(
            host: configuration.host, port: configuration.port, username: service, password: nil,
            database: configuration.database, tls: .disable)
        settings.options.maximumConnections = maximumConnections
        let client = PostgresClient(configuration: settings, backgroundLogger: TestDatabase.logger)
        let runner = Task { await client.run() }
        let database = try TenantDatabase(client: client, policies: policies, secret: secret, protectedTables: tables)
        let fixture = TenantFixture(
            configuration: configuration, owner: owner, service: service, secret: secret, client: client,
            policies: policies, database: database, runner: runner)
        if verify { try await database.verify() }
        return fixture
    }

    private init(
        configuration: PostgresFleetConfiguration, owner: String, service: String, secret: TenantDatabase.BindingSecret,
        client: PostgresClient, policies: PolicyManager, database: TenantDatabase, runner: Task<Void, Never>
    ) {
        self.configuration = configuration
        self.owner = owner
        self.service = service
        self.secret = secret
        self.client = client
        self.policies = policies
        self.database = database
        self.runner = runner
    }

    /// Runs `body` as the superuser on the fixture's database (row-level security does not hold for it).
    func superuser<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await TestDatabase.admin(configuration, body)
    }

    /// Runs `body` as the tables' owner.
    func asOwner<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await TestDatabase.admin(configuration) { connection in
            try await connection.run(sql: "SET ROLE \(owner)")
            return try await body(connection)
        }
    }

    /// Every row of a table, as the superuser sees them: (tenant, account or "", body).
    func allRows(_ table: String) async throws -> [(tenant: String, account: String, body: String)] {
        try await superuser { connection in
            let account = table == "app.notes" ? "account" : "''"
            var rows: [(tenant: String, account: String, body: String)] = []
            let sequence = try await connection.query(PostgresQuery(unsafeSQL: "SELECT tenant, \(account), body FROM \(table)"), logger: TestDatabase.logger)
            for try await (tenant, account, body) in sequence.decode((String, String, String).self) {
                rows.append((tenant, account, body))
            }
            return rows
        }
    }

    func shutdown() {
        runner.cancel()
    }
}

extension PostgresConnection {
    /// Runs a statement of the test's own (never with values from outside the test) and drops its rows.
    func run(sql: String) async throws {
        try await run(PostgresQuery(unsafeSQL: sql))
    }

    /// Runs a query and drops its rows.
    func run(_ query: PostgresQuery) async throws {
        _ = try await self.query(query, logger: TestDatabase.logger).collect()
    }

    /// The first column of every row, decoded as `T`.
    func values<T: PostgresDecodable & Sendable>(_ query: PostgresQuery, as type: T.Type = T.self) async throws -> [T] {
        var values: [T] = []
        for try await value in try await self.query(query, logger: TestDatabase.logger).decode(T.self) {
            values.append(value)
        }
        return values
    }
}
