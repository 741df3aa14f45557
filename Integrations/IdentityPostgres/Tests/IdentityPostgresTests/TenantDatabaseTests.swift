import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

/// Runs `body` with `account` as the thread identity.
func under<T: Sendable>(_ account: Identity, _ body: () async throws -> T) async throws -> T {
    try await IdentityContext.withThreadIdentity(account) { try await body() }
}

/// The SQLSTATE of a server error, or `nil`.
func sqlState(of error: any Error) -> String? {
    (error as? PSQLError)?.serverInfo?[.sqlState]
}

/// Runs each statement in a transaction of `account`'s; each must be refused for want of privilege (42501).
func expectRefused(_ database: TenantDatabase, under account: Identity, _ statements: [String]) async throws {
    for sql in statements {
        do {
            try await under(account) {
                try await database.withTransaction { connection in try await connection.run(sql: sql) }
            }
            Issue.record("accepted: \(sql)")
        } catch {
            #expect(sqlState(of: error) == "42501", "\(sql): \(error)")
        }
    }
}

extension FleetTests {
    @Suite("TenantDatabase")
    struct TenantDatabaseTests {
        static let alice = Identity("alice@contoso.com")
        static let amy = Identity("amy@contoso.com")
        static let bob = Identity("bob@fabrikam.com")

        /// Every row of `table` the caller's transaction sees: (tenant, body).
        static func visible(_ database: TenantDatabase, _ table: String = "app.documents") async throws -> [String] {
            try await database.withTransaction { connection in
                try await connection.values(PostgresQuery(unsafeSQL: "SELECT tenant || '/' || body FROM \(table) ORDER BY id"))
            }
        }

        static func insert(_ database: TenantDatabase, _ body: String, into table: String = "app.documents") async throws {
            let query: PostgresQuery = table == "app.notes"
                ? "INSERT INTO app.notes (body) VALUES (\(body))"
                : "INSERT INTO app.documents (body) VALUES (\(body))"
            try await database.withTransaction { connection in
                try await connection.run(query)
            }
        }

        @Test("two tenants: each reads, changes and deletes its own rows only; writing another tenant's row is refused")
        func twoTenants() async throws {
            let fixture = try await TenantFixture.make()
            defer { fixture.shutdown() }
            let database = fixture.database
            try await under(Self.alice) { try await Self.insert(database, "a1") }
            try await under(Self.amy) { try await Self.insert(database, "a2") }
            try await under(Self.bob) { try await Self.insert(database, "b1") }
            #expect(try await under(Self.alice) { try await Self.visible(database) } == ["contoso.com/a1", "contoso.com/a2"])
            #expect(try await under(Self.bob) { try await Self.visible(database) } == ["fabrikam.com/b1"])
            // An unscoped UPDATE and DELETE touch the caller's tenant only.
            let changed = try await under(Self.bob) {
                try await database.withTransaction { connection in
                    try await connection.values("UPDATE app.documents SET body = body || '!' RETURNING body", as: String.self)
                }
            }
            #expect(changed == ["b1!"])
            let deleted = try await under(Self.alice) {
                try await database.withTransaction { connection in
                    try await connection.values("DELETE FROM app.documents WHERE body LIKE 'b%' RETURNING body", as: String.self)
                }
            }
            #expect(deleted.isEmpty)
            // Writing a row of another tenant, or moving one there: the policy's WITH CHECK refuses (42501), and
            // nothing of the transaction stays.
            for statement in [
                "INSERT INTO app.documents (tenant, body) VALUES ('fabrikam.com', 'planted')",
                "UPDATE app.documents SET tenant = 'fabrikam.com'",
            ] {
                await #expect(throws: PSQLError.self) {
                    try await under(Self.alice) {
                        try await database.withTransaction { connection in
                            try await connection.run("INSERT INTO app.documents (body) VALUES ('lost')")
                            try await connection.run(sql: statement)
                        }
                    }
                }
            }
            let rows = try await fixture.allRows("app.documents").map { "\($0.tenant)/\($0.body)" }.sorted()
            #expect(rows == ["contoso.com/a1", "contoso.com/a2", "fabrikam.com/b1!"])
            // Per-account rows: accounts of one tenant do not see each other's notes.
            try await under(Self.alice) { try await Self.insert(database, "alice's", into: "app.notes") }
            try await under(Self.amy) { try await Self.insert(database, "amy's", into: "app.notes") }
            #expect(try await under(Self.alice) { try await Self.visible(database, "app.notes") } == ["contoso.com/alice's"])
            #expect(try await under(Self.amy) { try await Self.visible(database, "app.notes") } == ["contoso.com/amy's"])
        }

        @Test("names with quotes, backslashes, %, _, newlines, 4 KiB and non-ASCII are bound, never interpreted")
        func oddNames() async throws {
            let fixture = try await TenantFixture.make()
            defer { fixture.shutdown() }
            let database = fixture.database
            let policies = fixture.policies
            let names: [(account: String, tenant: String)] = [
                ("o'brien@contoso.com", "o'brien'; DROP TABLE app.documents; --"),
                (#"back\slash@contoso.com"#, #"te\nant\\"#),
                ("percent%@contoso.com", "ten%"),
                ("under_score@contoso.com", "ten_"),
                ("new\nline@contoso.com", "ten\nant"),
                (String(repeating: "x", count: 4096) + "@contoso.com", String(repeating: "t", count: 4096)),
                ("Ünïcødé@bücher.example", "Bücher.Example"),
                ("emoji🙂@contoso.com", "テナント"),
                (#"quote"d$1@contoso.com"#, #"$2"quoted"#),
            ]
            for (account, tenant) in names {
                policies.registerAccount(Identity(account), tenantID: TenantID(tenant))
            }
            for (account, _) in names {
                try await under(Identity(account)) { try await Self.insert(database, account, into: "app.notes") }
            }
            for (account, tenant) in names {
                let identity = Identity(account)
                let (boundAccount, boundTenant, bodies) = try await under(identity) {
                    try await database.withTransaction { connection in
                        let row = try await connection.query(
                            "SELECT identity_rls.current_account(), identity_rls.current_tenant()", logger: TestDatabase.logger
                        ).collect()
                        let (boundAccount, boundTenant) = try #require(row.first).decode((String, String).self)
                        let bodies: [String] = try await connection.values("SELECT body FROM app.notes")
                        return (boundAccount, boundTenant, bodies)
                    }
                }
                #expect(boundAccount == identity.foldedName)
                #expect(boundTenant == Identity(tenant).foldedName)
                #expect(bodies == [account])
            }
            // The LIKE wildcards in a tenant are text: "ten%" and "ten_" see only their own rows.
            let all = try await fixture.allRows("app.notes")
            #expect(all.count == names.count)
            #expect(Set(all.map(\.tenant)).count == names.count)
        }

        @Test("SQL in the body cannot widen the view: set_config, SET, RESET, copied settings, SET ROLE, SET SESSION AUTHORIZATION, nested transactions, function calls")
        func forging() async throws {
            let fixture = try await TenantFixture.make()
            defer { fixture.shutdown() }
            let database = fixture.database
            try await under(Self.alice) { try await Self.insert(database, "contoso-row") }
            try await under(Self.bob) { try await Self.insert(database, "fabrikam-row") }
            // Bob's own settings, as SQL in his transaction could read (and keep) them.
            let copied: [String] = try await under(Self.bob) {
                try await database.withTransaction { connection in
                    try await connection.values(
                        "SELECT current_setting('identity.account') || E'\\n' || current_setting('identity.tenant') || E'\\n' || current_setting('identity.binding')")
                }
            }
            let parts = try #require(copied.first).split(separator: "\n").map(String.init)
            try #require(parts.count == 3)
            let replay = "SELECT set_config('identity.account', '\(parts[0])', true), set_config('identity.tenant', '\(parts[1])', true), set_config('identity.binding', '\(parts[2])', true)"
            let replaySession = "SELECT set_config('identity.account', '\(parts[0])', false), set_config('identity.tenant', '\(parts[1])', false), set_config('identity.binding', '\(parts[2])', false)"

            // Ways that run without an error: afterwards Alice's transaction sees no row of Bob's (in fact none).
            let quiet: [[String]] = [
                ["SELECT set_config('identity.tenant', 'fabrikam.com', true)"],
                ["SELECT set_config('identity.tenant', 'fabrikam.com', false)"],
                ["SELECT set_config('identity.tenant', 'fabrikam.com', true), set_config('identity.account', 'bob@fabrikam.com', true)"],
                ["SET identity.tenant = 'fabrikam.com'"],
                ["SET LOCAL identity.tenant = 'fabrikam.com'"],
                ["RESET identity.binding"],
                ["RESET ALL"],
                ["SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET TIME ZONE 'Pacific/Chatham'"],
                [replay],
                [replaySession],
                ["BEGIN"],
                ["SAVEPOINT s", "SELECT set_config('identity.tenant', 'fabrikam.com', true)", "RELEASE SAVEPOINT s"],
                ["SAVEPOINT s", replay, "ROLLBACK TO SAVEPOINT s"],
                ["COMMIT", "BEGIN", replay],
                ["COMMIT", "BEGIN"],
                ["ROLLBACK", replaySession],
            ]
            for attempt in quiet {
                let seen: [String] = try await under(Self.alice) {
                    try await database.withTransaction { connection in
                        for statement in attempt { try await connection.run(sql: statement) }
                        return try await connection.values("SELECT tenant || '/' || body FROM app.documents")
                    }
                }
                #expect(!seen.contains { $0.hasPrefix("fabrikam.com") }, "\(attempt)")
                // Writing through the forged settings is refused or lands nowhere near Bob's rows.
                _ = try? await under(Self.alice) {
                    try await database.withTransaction { connection in
                        for statement in attempt { try await connection.run(sql: statement) }
                        try await connection.run("UPDATE app.documents SET body = 'overwritten'")
                        try await connection.run("DELETE FROM app.documents")
                        try await connection.run("INSERT INTO app.documents (tenant, body) VALUES ('fabrikam.com', 'planted')")
                    }
                }
            }
            // Ways that PostgreSQL refuses outright.
            let refused: [(String, String)] = [
                ("SET ROLE \(fixture.owner)", "42501"),
                ("SET ROLE postgres", "42501"),
                ("SET SESSION AUTHORIZATION postgres", "42501"),
                ("SELECT identity_rls.bind('bob@fabrikam.com', 'fabrikam.com', '\\x00')", "42501"),
                ("SELECT identity_rls.mac('bob@fabrikam.com', 'fabrikam.com')", "42501"),
                ("SELECT * FROM identity_rls.binding_key", "42501"),
                ("UPDATE identity_rls.binding_key SET verifier = 'x'", "42501"),
                ("ALTER TABLE app.documents DISABLE ROW LEVEL SECURITY", "42501"),
                ("ALTER TABLE app.documents NO FORCE ROW LEVEL SECURITY", "42501"),
                ("DROP POLICY identity_tenant_guard ON app.documents", "42501"),
                ("TRUNCATE app.documents", "42501"),
                ("CREATE TEMP TABLE stash AS SELECT * FROM app.documents", "42501"),
                ("CREATE OR REPLACE FUNCTION identity_rls.current_tenant() RETURNS text LANGUAGE sql AS $$ SELECT 'fabrikam.com' $$", "42501"),
            ]
            for (statement, expected) in refused {
                do {
                    try await under(Self.alice) {
                        try await database.withTransaction { connection in try await connection.run(sql: statement) }
                    }
                    Issue.record("\(statement) was allowed")
                } catch {
                    #expect(sqlState(of: error) == expected, "\(statement): \(String(reflecting: error))")
                }
            }
            // Outside any transaction of the runtime, the same settings bind nothing either.
            let outside: [String] = try await fixture.client.withConnection { connection in
                try await connection.run(sql: replaySession)
                return try await connection.values("SELECT body FROM app.documents")
            }
            #expect(outside.isEmpty)
            // Bob's row is as it was; Alice's did not move.
            let rows = try await fixture.allRows("app.documents").map { "\($0.tenant)/\($0.body)" }.sorted()
            #expect(rows.contains("fabrikam.com/fabrikam-row"))
            #expect(!rows.contains { $0.hasPrefix("fabrikam.com") && $0 != "fabrikam.com/fabrikam-row" })
            #expect(try await under(Self.bob) { try await Self.visible(database) } == ["fabrikam.com/fabrikam-row"])
        }

        @Test("the pool: after a commit, a rollback, a failure, a swallowed failure or a cancellation the connection carries nothing")
        func poolHygiene() async throws {
            let fixture = try await TenantFixture.make(maximumConnections: 1)
            defer { fixture.shutdown() }
            let database = fixture.database
            let client = fixture.client
            /// What a query through the pool, outside withTransaction, sees on the one connection.
            func outside() async throws -> (rows: Int, tenant: String, binding: String) {
                try await client.withConnection { connection in
                    let rows = try await connection.query(
                        """
                        SELECT (SELECT count(*) FROM app.documents)::bigint, coalesce(current_setting('identity.tenant', true), ''),
                               coalesce(current_setting('identity.binding', true), '')
                        """, logger: TestDatabase.logger).collect()
                    let (count, tenant, binding) = try #require(rows.first).decode((Int64, String, String).self)
                    return (Int(count), tenant, binding)
                }
            }
            struct Planned: Error {}
            try await under(Self.alice) { try await Self.insert(database, "committed") }
            #expect(try await outside() == (0, "", ""))
            await #expect(throws: Planned.self) {
                try await under(Self.alice) {
                    try await database.withTransaction { connection in
                        try await connection.run("INSERT INTO app.documents (body) VALUES ('thrown')")
                        throw Planned()
                    }
                }
            }
            #expect(try await outside() == (0, "", ""))
            await #expect(throws: PSQLError.self) {
                try await under(Self.alice) {
                    try await database.withTransaction { connection in
                        try await connection.run("INSERT INTO app.documents (body) VALUES ('failed')")
                        try await connection.run("SELECT 1/0")
                    }
                }
            }
            #expect(try await outside() == (0, "", ""))
            await #expect(throws: TenantDatabaseError.rolledBack) {
                try await under(Self.alice) {
                    try await database.withTransaction { connection in
                        try await connection.run("INSERT INTO app.documents (body) VALUES ('swallowed')")
                        _ = try? await connection.run("SELECT 1/0")
                    }
                }
            }
            #expect(try await outside() == (0, "", ""))
            // Cancelled while the body waits: rolled back, nothing kept, the connection clean.
            let started = NIOLockedValueBox(false)
            let task = Task {
                try await under(Self.alice) {
                    try await database.withTransaction { connection in
                        try await connection.run("INSERT INTO app.documents (body) VALUES ('cancelled')")
                        started.withLockedValue { $0 = true }
                        while !Task.isCancelled { try await connection.run("SELECT pg_sleep(0.01)") }
                    }
                }
            }
            #expect(await TestDatabase.eventuallyAsync(within: 20) { started.withLockedValue { $0 } })
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(try await outside() == (0, "", ""))
            // A session-wide SET made in the body outlives the transaction, as on any pooled connection, but
            // binds nothing: the next request of another tenant sees its own rows only.
            try await under(Self.alice) {
                try await database.withTransaction { connection in
                    try await connection.run("SET identity.tenant = 'contoso.com'")
                    try await connection.run("SELECT set_config('identity.binding', current_setting('identity.binding'), false)")
                }
            }
            #expect(try await outside().rows == 0)
            #expect(try await under(Self.bob) { try await Self.visible(database) } == [])
            // A cursor WITH HOLD outlives its transaction, filled with Alice's rows: the next transaction's binding
            // finds it, and the runtime replaces the connection, so Bob's request cannot fetch from it.
            try await under(Self.alice) {
                try await database.withTransaction { connection in
                    try await connection.run("DECLARE stash CURSOR WITH HOLD FOR SELECT body FROM app.documents")
                }
            }
            do {
                let fetched: [String] = try await under(Self.bob) {
                    try await database.withTransaction { connection in
                        try await connection.values("FETCH ALL FROM stash")
                    }
                }
                Issue.record("Bob fetched from Alice's cursor: \(fetched)")
            } catch {
                #expect(sqlState(of: error) == "34000", "\(String(reflecting: error))")
            }
            #expect(try await under(Self.bob) { try await Self.visible(database) } == [])
            #expect(try await under(Self.alice) { try await Self.visible(database) } == ["contoso.com/committed"])
            let rows = try await fixture.allRows("app.documents").map(\.body)
            #expect(rows == ["committed"])
        }

        @Test("verify() refuses a superuser, BYPASSRLS, any membership, CREATE, an owned or unforced table, TRUNCATE, a missing guard, a readable key, a missing schema, large objects, backend signals, activity and statistics, no way to end a backend")
        func verifyRefusesUnsafeSetUps() async throws {
            let fixture = try await TenantFixture.make(verify: false)
            defer { fixture.shutdown() }
            try await fixture.database.verify()
            #expect(fixture.database.isVerified)
            let service = fixture.service
            let owner = fixture.owner
            // Each change is made, checked and undone.
            let cases: [(change: String, undo: String, superuser: Bool)] = [
                ("ALTER ROLE \(service) BYPASSRLS", "ALTER ROLE \(service) NOBYPASSRLS", true),
                ("ALTER ROLE \(service) SUPERUSER", "ALTER ROLE \(service) NOSUPERUSER", true),
                ("GRANT \(owner) TO \(service)", "REVOKE \(owner) FROM \(service)", true),
                ("GRANT postgres TO \(service)", "REVOKE postgres FROM \(service)", true),
                ("ALTER TABLE app.notes NO FORCE ROW LEVEL SECURITY", "ALTER TABLE app.notes FORCE ROW LEVEL SECURITY", false),
                ("ALTER TABLE app.notes DISABLE ROW LEVEL SECURITY", "ALTER TABLE app.notes ENABLE ROW LEVEL SECURITY", false),
                ("GRANT TRUNCATE ON app.documents TO \(service)", "REVOKE TRUNCATE ON app.documents FROM \(service)", false),
                ("DROP POLICY identity_tenant_guard ON app.documents",
                 try TenantDatabase.rowLevelSecurity(table: "app.documents", tenantColumn: "tenant").last!, false),
                ("GRANT SELECT ON identity_rls.binding_key TO \(service)", "REVOKE SELECT ON identity_rls.binding_key FROM \(service)", false),
                ("GRANT pg_read_all_data TO \(service)", "REVOKE pg_read_all_data FROM \(service)", true),
                ("GRANT EXECUTE ON FUNCTION identity_rls.mac(text, text) TO \(service)", "REVOKE EXECUTE ON FUNCTION identity_rls.mac(text, text) FROM \(service)", false),
                ("GRANT CREATE ON SCHEMA identity_rls TO \(service)", "REVOKE CREATE ON SCHEMA identity_rls FROM \(service)", false),
                ("REVOKE EXECUTE ON FUNCTION identity_rls.bind(text, text, bytea) FROM \(service)",
                 "GRANT EXECUTE ON FUNCTION identity_rls.bind(text, text, bytea) TO \(service)", false),
                ("ALTER TABLE app.notes OWNER TO \(service)", "ALTER TABLE app.notes OWNER TO \(owner)", true),
                ("GRANT TEMPORARY ON DATABASE \(try #require(fixture.configuration.database)) TO \(service)",
                 "REVOKE TEMPORARY ON DATABASE \(try #require(fixture.configuration.database)) FROM \(service)", true),
                ("GRANT EXECUTE ON FUNCTION pg_catalog.lo_from_bytea(oid, bytea) TO \(service)",
                 "REVOKE EXECUTE ON FUNCTION pg_catalog.lo_from_bytea(oid, bytea) FROM \(service)", true),
                ("GRANT EXECUTE ON FUNCTION pg_catalog.lo_create(oid) TO PUBLIC",
                 "REVOKE EXECUTE ON FUNCTION pg_catalog.lo_create(oid) FROM PUBLIC", true),
                ("DO $$ BEGIN PERFORM lo_create(424242); ALTER LARGE OBJECT 424242 OWNER TO \(service); END $$",
                 "SELECT lo_unlink(424242)", true),
                ("GRANT EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint) TO \(service)",
                 "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint) FROM \(service)", true),
                ("GRANT EXECUTE ON FUNCTION pg_catalog.pg_cancel_backend(integer) TO PUBLIC",
                 "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_cancel_backend(integer) FROM PUBLIC", true),
                ("GRANT pg_signal_backend TO \(service)", "REVOKE pg_signal_backend FROM \(service)", true),
                ("GRANT EXECUTE ON FUNCTION pg_catalog.pg_lock_status() TO \(service)",
                 "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_lock_status() FROM \(service)", true),
                ("GRANT EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) TO PUBLIC",
                 "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) FROM PUBLIC", true),
                ("GRANT SELECT ON pg_catalog.pg_class TO \(service)", "REVOKE SELECT ON pg_catalog.pg_class FROM \(service)", true),
                ("GRANT SELECT ON pg_catalog.pg_db_role_setting TO PUBLIC", "REVOKE SELECT ON pg_catalog.pg_db_role_setting FROM PUBLIC", true),
                ("GRANT CREATE ON SCHEMA public TO PUBLIC", "REVOKE CREATE ON SCHEMA public FROM PUBLIC", true),
                ("GRANT CREATE ON DATABASE \(try #require(fixture.configuration.database)) TO \(service)",
                 "REVOKE CREATE ON DATABASE \(try #require(fixture.configuration.database)) FROM \(service)", true),
                ("DO $$ BEGIN CREATE ROLE helper_\(service) NOLOGIN NOINHERIT; GRANT helper_\(service) TO \(service); END $$",
                 "DROP ROLE helper_\(service)", true),
                ("REVOKE pg_signal_backend FROM \(owner)", "GRANT pg_signal_backend TO \(owner)", true),
            ]
            for (change, undo, superuser) in cases {
                let run: (String) async throws -> Void = { sql in
                    if superuser {
                        try await fixture.superuser { try await $0.run(sql: sql) }
                    } else {
                        try await fixture.asOwner { try await $0.run(sql: sql) }
                    }
                }
                try await run(change)
                let fresh = try TenantDatabase(
                    client: fixture.client, policies: fixture.policies, secret: fixture.secret, protectedTables: TenantFixture.tables)
                do {
                    try await fresh.verify()
                    Issue.record("verify() accepted: \(change)")
                } catch {
                    guard case .unsafeConfiguration = error else {
                        Issue.record("\(change): \(error)")
                        try await run(undo)
                        continue
                    }
                }
                #expect(!fresh.isVerified)
                let refused = await TenantDatabaseOfflineTests.refusal(fresh, under: Self.alice)
                #expect(refused == (.notVerified, false))
                try await run(undo)
                try await fresh.verify()
            }
            // A table that is not there, and a pool of the superuser.
            let missing = try TenantDatabase(
                client: fixture.client, policies: fixture.policies, secret: fixture.secret, protectedTables: ["app.nothing"])
            await #expect(throws: TenantDatabaseError.self) { try await missing.verify() }
            var settings = PostgresClient.Configuration(
                host: fixture.configuration.host, port: fixture.configuration.port, username: "postgres", password: nil,
                database: fixture.configuration.database, tls: .disable)
            settings.options.maximumConnections = 1
            let superClient = PostgresClient(configuration: settings, backgroundLogger: TestDatabase.logger)
            let superRunner = Task { await superClient.run() }
            defer { superRunner.cancel() }
            let superDatabase = try TenantDatabase(
                client: superClient, policies: fixture.policies, secret: fixture.secret, protectedTables: TenantFixture.tables)
            await #expect(throws: TenantDatabaseError.unsafeConfiguration(reason: "the role \"postgres\" is a superuser")) {
                try await superDatabase.verify()
            }
            // A database without the binding schema.
            try await fixture.asOwner { try await $0.run(sql: "DROP SCHEMA identity_rls CASCADE") }
            let bare = try TenantDatabase(
                client: fixture.client, policies: fixture.policies, secret: fixture.secret, protectedTables: TenantFixture.tables)
            await #expect(throws: TenantDatabaseError.self) { try await bare.verify() }
        }

        @Test("the server killed mid-transaction: a typed error, nothing half-written; after the restart the pool binds again",
              .enabled(if: ServerControl.isAvailable, "needs scripts/with-postgres.sh's IDENTITY_PG_DATA to kill the server"))
        func serverKilled() async throws {
            let fixture = try await TenantFixture.make(maximumConnections: 2)
            defer { fixture.shutdown() }
            let database = fixture.database
            try await under(Self.alice) { try await Self.insert(database, "before") }
            // Crash recovery replays the WAL since the last checkpoint: after the load tests that is a lot, which
            // a loaded machine replays slowly. A checkpoint first keeps the restart short.
            try await fixture.superuser { try await $0.run(sql: "CHECKPOINT") }
            let inserted = NIOLockedValueBox(false)
            let killed = NIOLockedValueBox(false)
            let transaction = Task {
                try await under(Self.alice) {
                    try await database.withTransaction { connection in
                        try await connection.run("INSERT INTO app.documents (body) VALUES ('half-written')")
                        inserted.withLockedValue { $0 = true }
                        // The body goes on without the database until the server is gone; COMMIT then meets it.
                        while !killed.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
                    }
                }
            }
            #expect(await TestDatabase.eventuallyAsync(within: 20) { inserted.withLockedValue { $0 } })
            try ServerControl.kill()
            killed.withLockedValue { $0 = true }
            do {
                try await transaction.value
                Issue.record("the transaction committed on a killed server")
            } catch let error as TenantDatabaseError {
                guard case .unavailable = error else { Issue.record("\(error)"); return }
            }
            try ServerControl.start()
            #expect(try await fixture.allRows("app.documents").map(\.body) == ["before"])
            // The pool connects again; the next transaction is bound as any other.
            var seen: [String] = []
            for _ in 0..<200 {
                do {
                    seen = try await under(Self.alice) { try await Self.visible(database) }
                    break
                } catch {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            #expect(seen == ["contoso.com/before"])
        }

        @Test("a runtime with another secret binds nothing: the database refuses it (bindingRefused)")
        func wrongSecret() async throws {
            let fixture = try await TenantFixture.make()
            defer { fixture.shutdown() }
            try await under(Self.alice) { try await Self.insert(fixture.database, "kept") }
            let impostor = try TenantDatabase(
                client: fixture.client, policies: fixture.policies, secret: .generate(), protectedTables: TenantFixture.tables)
            try await impostor.verify()
            let ran = NIOLockedValueBox(false)
            do {
                try await under(Self.alice) {
                    try await impostor.withTransaction { _ in ran.withLockedValue { $0 = true } }
                }
                Issue.record("a wrong secret was accepted")
            } catch let error as TenantDatabaseError {
                guard case .bindingRefused = error else { Issue.record("\(error)"); return }
            }
            #expect(!ran.withLockedValue { $0 })
            // Installing a new secret: the old runtime is refused from then on, the new one works.
            let renewed = TenantDatabase.BindingSecret.generate()
            try await fixture.asOwner { connection in
                try await TenantDatabase.install(on: connection, serviceRole: fixture.service, secret: renewed, logger: TestDatabase.logger)
            }
            await #expect(throws: TenantDatabaseError.self) {
                try await under(Self.alice) { try await Self.visible(fixture.database) }
            }
            let current = try TenantDatabase(
                client: fixture.client, policies: fixture.policies, secret: renewed, protectedTables: TenantFixture.tables)
            try await current.verify()
            #expect(try await under(Self.alice) { try await Self.visible(current) } == ["contoso.com/kept"])
        }
    }
}

extension TestDatabase {
    /// Polls `condition` every 5 ms, without blocking a thread, until it holds or `seconds` passed.
    static func eventuallyAsync(within seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }
}
