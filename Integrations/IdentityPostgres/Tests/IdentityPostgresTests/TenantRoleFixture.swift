import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import Logging
import PostgresNIO
import Testing

/// A database of its own in the role-per-tenant mode: an owner role (owns the binding schema and every tenant's
/// schema and tables), the role-per-tenant hardening, and the given tenants provisioned, each with
/// - `documents (id, tenant, body)`: rows of the tenant;
/// - `notes (id, tenant, account, body)`: rows of one account, under row-level security inside the schema.
final class TenantRoleFixture: Sendable {
    let configuration: PostgresFleetConfiguration
    let owner: String
    let roles: TenantDatabase.TenantRoles
    let secret: TenantDatabase.BindingSecret
    let policies: PolicyManager
    let database: TenantDatabase
    let tenants: [TenantID]

    static let tables = ["documents", "notes"]

    static let tableStatements: [String] = [
        """
        CREATE TABLE documents (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant text NOT NULL DEFAULT identity_rls.current_tenant(),
            body text NOT NULL)
        """,
        """
        CREATE TABLE notes (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant text NOT NULL DEFAULT identity_rls.current_tenant(),
            account text NOT NULL DEFAULT identity_rls.current_account(),
            body text NOT NULL)
        """,
    ]

    static func make(
        tenants: [TenantID], policies: PolicyManager = PolicyManager(), maximumPools: Int = 8,
        connectionsPerPool: Int = 2, transactionTimeout: Duration = .seconds(30)
    ) async throws -> TenantRoleFixture {
        let configuration = try await TestDatabase.make()
        let databaseName = try #require(configuration.database)
        let suffix = databaseName.dropFirst("identity_test_".count)
        let owner = "roles_owner_\(suffix)"
        let secret = TenantDatabase.BindingSecret.generate()
        var connection = PostgresClient.Configuration(
            host: configuration.host, port: configuration.port, username: "unused", password: nil,
            database: configuration.database, tls: .disable)
        connection.options.maximumConnections = connectionsPerPool
        let roles = try TenantDatabase.TenantRoles(
            connection: connection, owner: owner, prefix: "t_\(suffix)", secret: .generate(), maximumPools: maximumPools)
        try await TestDatabase.admin { try await $0.run(sql: "CREATE ROLE \(owner) NOLOGIN") }
        let tables = tableStatements
            + (try TenantDatabase.rowLevelSecurity(table: "notes", tenantColumn: "tenant", accountColumn: "account"))
        try await TestDatabase.admin(configuration) { connection in
            for statement in try TenantDatabase.hardeningStatements(database: databaseName, owner: owner) {
                try await connection.run(sql: statement)
            }
            try await connection.run(sql: "GRANT CREATE ON DATABASE \(databaseName) TO \(owner)")
            try await connection.run(sql: "SET ROLE \(owner)")
            try await TenantDatabase.install(on: connection, serviceRole: owner, secret: secret, logger: TestDatabase.logger)
            try await connection.run(sql: "RESET ROLE")
            for tenant in tenants {
                try await TenantDatabase.provision(tenant, roles: roles, tables: tables, on: connection, logger: TestDatabase.logger)
            }
        }
        let database = try TenantDatabase(
            tenantRoles: roles, policies: policies, secret: secret, protectedTables: Self.tables,
            transactionTimeout: transactionTimeout)
        try await database.verify()
        return TenantRoleFixture(
            configuration: configuration, owner: owner, roles: roles, secret: secret, policies: policies,
            database: database, tenants: tenants)
    }

    private init(
        configuration: PostgresFleetConfiguration, owner: String, roles: TenantDatabase.TenantRoles,
        secret: TenantDatabase.BindingSecret, policies: PolicyManager, database: TenantDatabase, tenants: [TenantID]
    ) {
        self.configuration = configuration
        self.owner = owner
        self.roles = roles
        self.secret = secret
        self.policies = policies
        self.database = database
        self.tenants = tenants
    }

    /// Runs `body` as the superuser on the fixture's database.
    func superuser<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await TestDatabase.admin(configuration, body)
    }

    /// Every row of a table in every tenant's schema, as the superuser sees them: (tenant, account or "", body),
    /// and the schema's own tenant.
    func allRows(_ table: String) async throws -> [(tenant: String, account: String, body: String, schemaTenant: String)] {
        var rows: [(tenant: String, account: String, body: String, schemaTenant: String)] = []
        for tenant in tenants {
            let schema = roles.name(for: tenant)
            let account = table == "notes" ? "account" : "''"
            try await superuser { connection in
                let sequence = try await connection.query(
                    PostgresQuery(unsafeSQL: "SELECT tenant, \(account), body FROM \(schema).\(table)"), logger: TestDatabase.logger)
                for try await (rowTenant, rowAccount, body) in sequence.decode((String, String, String).self) {
                    rows.append((rowTenant, rowAccount, body, tenant.rawValue.lowercased()))
                }
            }
        }
        return rows
    }
}
