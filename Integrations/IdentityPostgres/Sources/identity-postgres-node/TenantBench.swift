import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import Logging
import PostgresNIO

/// The cost of a tenant-bound transaction: a read of one row by primary key through
/// `TenantDatabase.withTransaction` (BEGIN, the binding, the SELECT, COMMIT, the session reset: 5 round trips)
/// against the same transaction and query through postgres-nio's own `withTransaction` on an unprotected copy
/// of the table
/// (BEGIN, SELECT, COMMIT: 3), and one bare `SELECT 1` (1 round trip), interleaved in one run over one
/// connection each. Sets up its own roles, schema and tables (as the superuser of PGUSER) and removes them.
struct TenantBench {
    let configuration: PostgresFleetConfiguration
    let quick: Bool

    static let logger = Logger(label: "identity-tenant-bench", factory: { _ in SwiftLogNoOpLogHandler() })

    func run() async throws {
        let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(10).lowercased()
        let owner = "identity_bench_owner_\(suffix)"
        let service = "identity_bench_service_\(suffix)"
        let schema = "identity_bench_\(suffix)"
        let database = configuration.database ?? configuration.username
        let secret = TenantDatabase.BindingSecret.generate()
        // Hex only: safe in the statement, and a password for servers that do not trust local connections.
        let password = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await admin { connection in
            for statement in [
                "CREATE ROLE \(owner) NOLOGIN", "CREATE ROLE \(service) LOGIN PASSWORD '\(password)'",
            ] + (try TenantDatabase.hardeningStatements(database: database, owner: owner)) + [
                "GRANT CREATE ON DATABASE \"\(database)\" TO \(owner)", "SET ROLE \(owner)",
            ] {
                try await connection.execute(statement)
            }
            try await TenantDatabase.install(on: connection, serviceRole: service, secret: secret, logger: Self.logger)
            for statement in [
                "CREATE SCHEMA \(schema)", "GRANT USAGE ON SCHEMA \(schema) TO \(service)",
                "CREATE TABLE \(schema).documents (id bigint PRIMARY KEY, tenant text NOT NULL, body text NOT NULL)",
                "CREATE TABLE \(schema).plain (id bigint PRIMARY KEY, tenant text NOT NULL, body text NOT NULL)",
                "INSERT INTO \(schema).documents SELECT i, 'tenant' || (i % 8) || '.example', 'row ' || i FROM generate_series(0, 9999) i",
                "INSERT INTO \(schema).plain SELECT * FROM \(schema).documents",
            ] + (try TenantDatabase.rowLevelSecurity(table: "\(schema).documents", tenantColumn: "tenant")) + [
                "GRANT SELECT ON \(schema).documents, \(schema).plain TO \(service)",
                "ANALYZE \(schema).documents", "ANALYZE \(schema).plain",
            ] {
                try await connection.execute(statement)
            }
        }
        do {
            try await measure(schema: schema, service: service, password: password, database: database, secret: secret)
        } catch {
            try await removeAll(schema: schema, roles: [service, owner])
            throw error
        }
        try await removeAll(schema: schema, roles: [service, owner])
        try await runRolePerTenant(suffix: String(suffix))
    }

    private func removeAll(schema: String, roles: [String]) async throws {
        try await admin { connection in
            try await connection.execute("DROP SCHEMA \(schema) CASCADE")
            for role in roles {
                try await connection.execute("DROP OWNED BY \(role) CASCADE")
                try await connection.execute("DROP ROLE \(role)")
            }
        }
    }

    private func measure(
        schema: String, service: String, password: String, database: String, secret: TenantDatabase.BindingSecret
    ) async throws {
        print("row-level security on shared tables:")
        var settings = PostgresClient.Configuration(
            host: configuration.host, port: configuration.port, username: service, password: password,
            database: database, tls: .disable)
        settings.options.maximumConnections = 1
        let client = PostgresClient(configuration: settings, backgroundLogger: Self.logger)
        let runner = Task { await client.run() }
        defer { runner.cancel() }
        let policies = PolicyManager()
        let tenantDatabase = try TenantDatabase(
            client: client, policies: policies, secret: secret, protectedTables: ["\(schema).documents"])
        try await tenantDatabase.verify()
        let account = Identity("reader@tenant3.example")
        let documents = PostgresQuery(unsafeSQL: "SELECT body FROM \(schema).documents WHERE id = $1", binds: Self.binds(3))
        let plain = PostgresQuery(unsafeSQL: "SELECT body FROM \(schema).plain WHERE id = $1", binds: Self.binds(3))

        func bound() async throws -> Double {
            try await Self.timedRead("the bound read") {
                try await IdentityContext.withThreadIdentity(account) {
                    try await tenantDatabase.withTransaction { connection in
                        try await Self.single(connection.query(documents, logger: Self.logger))
                    }
                }
            }
        }
        func boundPlain() async throws -> Double {
            try await Self.timedRead("the bound read") {
                try await IdentityContext.withThreadIdentity(account) {
                    try await tenantDatabase.withTransaction { connection in
                        try await Self.single(connection.query(plain, logger: Self.logger))
                    }
                }
            }
        }
        func unbound() async throws -> Double {
            try await Self.timedRead("the plain read") {
                try await client.withTransaction(logger: Self.logger) { connection in
                    try await Self.single(connection.query(plain, logger: Self.logger))
                }
            }
        }
        func roundTrip() async throws -> Double {
            let start = DispatchTime.now().uptimeNanoseconds
            try await client.withConnection { connection in
                _ = try await connection.query("SELECT 1", logger: Self.logger).collect()
            }
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        }
        // Outside a bound transaction the protected row is not there at all.
        let outside = try await client.withConnection { connection in
            try await connection.query(documents, logger: Self.logger).collect().count
        }
        guard outside == 0 else { fatalError("a protected row was visible outside a bound transaction") }
        var samples: (bound: [Double], boundPlain: [Double], unbound: [Double], roundTrip: [Double]) = ([], [], [], [])
        let (rounds, perRound) = sampleCounts
        for _ in 0..<50 { _ = try await (bound(), unbound(), roundTrip()) }
        let clock = ContinuousClock()
        var boundTime = Duration.zero
        for _ in 0..<rounds {
            for _ in 0..<perRound { samples.unbound.append(try await unbound()) }
            let started = clock.now
            for _ in 0..<perRound { samples.bound.append(try await bound()) }
            boundTime += clock.now - started
            for _ in 0..<perRound { samples.boundPlain.append(try await boundPlain()) }
            for _ in 0..<perRound { samples.roundTrip.append(try await roundTrip()) }
        }
        let boundSeconds = Double(boundTime.components.seconds) + Double(boundTime.components.attoseconds) / 1e18
        func line(_ name: String, _ values: [Double], _ trips: Int) -> String {
            String(format: "%@ (%d round trips), %d reads: p50 %.3f ms p99 %.3f ms",
                   name, trips, values.count, percentile(values, 0.5), percentile(values, 0.99))
        }
        print(line("one-row read, TenantDatabase.withTransaction on the protected table", samples.bound, 5))
        print(line("one-row read, TenantDatabase.withTransaction on the unprotected copy", samples.boundPlain, 5))
        print(line("one-row read, PostgresClient.withTransaction on an unprotected copy", samples.unbound, 3))
        print(line("SELECT 1 outside a transaction", samples.roundTrip, 1))
        print(String(format: "extra per bound read: p50 %.3f ms (one round trip: p50 %.3f ms); bound reads on one connection: %.0f/s",
                     percentile(samples.bound, 0.5) - percentile(samples.unbound, 0.5), percentile(samples.roundTrip, 0.5),
                     Double(samples.bound.count) / boundSeconds))
    }

    /// Rounds and reads per round of each measurement.
    var sampleCounts: (rounds: Int, perRound: Int) { quick ? (3, 300) : (10, 1_000) }

    /// How long `read` took, in milliseconds; it must read row 3.
    static func timedRead(_ name: String, _ read: () async throws -> String) async throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        let body = try await read()
        guard body == "row 3" else { fatalError("\(name) returned \(body)") }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
    }

    static func binds(_ id: Int64) -> PostgresBindings {
        var binds = PostgresBindings()
        binds.append(id)
        return binds
    }

    static func single(_ rows: PostgresRowSequence) async throws -> String {
        var result: String?
        for try await body in rows.decode(String.self) { result = body }
        return result ?? "(none)"
    }

    func admin<T: Sendable>(database: String? = nil, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        var settings = PostgresConnection.Configuration(
            host: configuration.host, port: configuration.port, username: configuration.username,
            password: configuration.password, database: database ?? configuration.database, tls: configuration.tls)
        settings.options.connectTimeout = .seconds(5)
        let connection = try await PostgresConnection.connect(configuration: settings, id: 1, logger: Self.logger)
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

extension PostgresConnection {
    /// Runs one of the bench's own statements (names it made, no outside values) and reads it to the end.
    func execute(_ statement: String) async throws {
        _ = try await query(PostgresQuery(unsafeSQL: statement), logger: TenantBench.logger).collect()
    }
}
