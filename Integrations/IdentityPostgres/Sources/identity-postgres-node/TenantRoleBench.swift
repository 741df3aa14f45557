import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import Logging
import PostgresNIO

extension TenantBench {
    /// The same one-row read in the role-per-tenant mode, in a database of its own (its hardening changes the
    /// database's catalog privileges): `TenantDatabase.withTransaction` as the tenant's role against
    /// postgres-nio's own `withTransaction` as the same role on the same table.
    func runRolePerTenant(suffix: String) async throws {
        let database = "identity_bench_roles_\(suffix)"
        let owner = "identity_bench_roles_owner_\(suffix)"
        let tenant = TenantID("tenant3.example")
        var connection = PostgresClient.Configuration(
            host: configuration.host, port: configuration.port, username: "unused", password: nil,
            database: database, tls: .disable)
        connection.options.maximumConnections = 1
        let roles = try TenantDatabase.TenantRoles(
            connection: connection, owner: owner, prefix: "identity_bench_t_\(suffix)", secret: .generate(), maximumPools: 1)
        let secret = TenantDatabase.BindingSecret.generate()
        let role = roles.name(for: tenant)
        try await admin { connection in
            try await connection.execute("CREATE DATABASE \(database)")
            try await connection.execute("CREATE ROLE \(owner) NOLOGIN")
        }
        do {
            try await admin(database: database) { connection in
                for statement in try TenantDatabase.hardeningStatements(database: database, owner: owner) {
                    try await connection.execute(statement)
                }
                try await connection.execute("GRANT CREATE ON DATABASE \(database) TO \(owner)")
                try await connection.execute("SET ROLE \(owner)")
                try await TenantDatabase.install(on: connection, serviceRole: owner, secret: secret, logger: Self.logger)
                try await connection.execute("RESET ROLE")
                try await TenantDatabase.provision(
                    tenant, roles: roles,
                    tables: ["CREATE TABLE documents (id bigint PRIMARY KEY, tenant text NOT NULL, body text NOT NULL)"],
                    on: connection, logger: Self.logger)
                try await connection.execute(
                    "INSERT INTO \(role).documents SELECT i, 'tenant3.example', 'row ' || i FROM generate_series(0, 1249) i")
                try await connection.execute("ANALYZE \(role).documents")
            }
            try await measureRolePerTenant(roles: roles, tenant: tenant, secret: secret)
        } catch {
            try? await removeRolePerTenant(database: database, roles: [role, owner])
            throw error
        }
        try await removeRolePerTenant(database: database, roles: [role, owner])
    }

    private func measureRolePerTenant(
        roles: TenantDatabase.TenantRoles, tenant: TenantID, secret: TenantDatabase.BindingSecret
    ) async throws {
        print("a role and a schema per tenant:")
        let tenantDatabase = try TenantDatabase(
            tenantRoles: roles, policies: PolicyManager(), secret: secret, protectedTables: ["documents"])
        try await tenantDatabase.verify()
        var direct = roles.connection
        direct.username = roles.name(for: tenant)
        direct.password = roles.password(for: tenant)
        let client = PostgresClient(configuration: direct, backgroundLogger: Self.logger)
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        let account = Identity("reader@tenant3.example")
        let unqualified = PostgresQuery(unsafeSQL: "SELECT body FROM documents WHERE id = $1", binds: Self.binds(3))
        let qualified = PostgresQuery(
            unsafeSQL: "SELECT body FROM \(roles.name(for: tenant)).documents WHERE id = $1", binds: Self.binds(3))
        func bound() async throws -> Double {
            try await Self.timedRead("the bound read") {
                try await IdentityContext.withThreadIdentity(account) {
                    try await tenantDatabase.withTransaction { connection in
                        try await Self.single(connection.query(unqualified, logger: Self.logger))
                    }
                }
            }
        }
        func unbound() async throws -> Double {
            try await Self.timedRead("the plain read") {
                try await client.withTransaction(logger: Self.logger) { connection in
                    try await Self.single(connection.query(qualified, logger: Self.logger))
                }
            }
        }
        var samples: (bound: [Double], unbound: [Double]) = ([], [])
        let (rounds, perRound) = sampleCounts
        for _ in 0..<50 { _ = try await (bound(), unbound()) }
        for _ in 0..<rounds {
            for _ in 0..<perRound { samples.unbound.append(try await unbound()) }
            for _ in 0..<perRound { samples.bound.append(try await bound()) }
        }
        func line(_ name: String, _ values: [Double], _ trips: Int) -> String {
            String(format: "%@ (%d round trips), %d reads: p50 %.3f ms p99 %.3f ms",
                   name, trips, values.count, percentile(values, 0.5), percentile(values, 0.99))
        }
        print(line("one-row read, TenantDatabase.withTransaction as the tenant's role", samples.bound, 5))
        print(line("one-row read, PostgresClient.withTransaction as the same role", samples.unbound, 3))
    }

    private func removeRolePerTenant(database: String, roles: [String]) async throws {
        try await admin { connection in
            try await connection.execute("DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
            for role in roles { try await connection.execute("DROP ROLE IF EXISTS \(role)") }
        }
    }
}
