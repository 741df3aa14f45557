import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

extension FleetTests {
    /// The role-per-tenant mode against the same attacker as the row-level-security mode: what the shared tables
    /// leave open is refused there by the database's own privileges.
    @Suite("TenantDatabase, a role and a schema per tenant")
    struct TenantRoleModeTests {
        static let alice = TenantDatabaseTests.alice
        static let amy = TenantDatabaseTests.amy
        static let bob = TenantDatabaseTests.bob
        static let tenants = [TenantID("contoso.com"), TenantID("fabrikam.com")]

        static func visible(_ database: TenantDatabase, _ table: String = "documents") async throws -> [String] {
            try await database.withTransaction { connection in
                try await connection.values(PostgresQuery(unsafeSQL: "SELECT tenant || '/' || body FROM \(table) ORDER BY id"))
            }
        }

        static func insert(_ database: TenantDatabase, _ body: String, into table: String = "documents") async throws {
            try await database.withTransaction { connection in
                try await connection.run(PostgresQuery(unsafeSQL: "INSERT INTO \(table) (body) VALUES ($1)", binds: {
                    var binds = PostgresBindings()
                    binds.append(body)
                    return binds
                }()))
            }
        }

        @Test("each tenant reads and writes its own schema with unqualified names; another tenant's schema is refused")
        func ownSchemaOnly() async throws {
            let fixture = try await TenantRoleFixture.make(tenants: Self.tenants)
            let database = fixture.database
            try await under(Self.alice) { try await Self.insert(database, "a1") }
            try await under(Self.amy) { try await Self.insert(database, "a2") }
            try await under(Self.bob) { try await Self.insert(database, "b1") }
            try await under(Self.alice) { try await Self.insert(database, "alice's note", into: "notes") }
            #expect(try await under(Self.alice) { try await Self.visible(database) } == ["contoso.com/a1", "contoso.com/a2"])
            #expect(try await under(Self.bob) { try await Self.visible(database) } == ["fabrikam.com/b1"])
            // Rows of one account stay that account's inside its tenant's schema too.
            #expect(try await under(Self.amy) { try await Self.visible(database, "notes") }.isEmpty)
            let bobSchema = fixture.roles.name(for: TenantID("fabrikam.com"))
            try await expectRefused(database, under: Self.alice, [
                "SELECT * FROM \(bobSchema).documents",
                "EXPLAIN ANALYZE SELECT * FROM \(bobSchema).documents",
                "INSERT INTO \(bobSchema).documents (body) VALUES ('planted')",
                "LOCK TABLE \(bobSchema).documents IN ACCESS EXCLUSIVE MODE",
                "SELECT nextval('\(bobSchema).documents_id_seq')",
                "SET ROLE \(bobSchema)",
            ])
            #expect(try await fixture.allRows("documents").filter { $0.tenant != $0.schemaTenant }.isEmpty)
        }

        @Test("what row-level security leaves open is refused: planner counts, statistics, sizes, activity, locks, role defaults, large objects, signals")
        func sharedCatalogsRevealNothing() async throws {
            let fixture = try await TenantRoleFixture.make(tenants: Self.tenants)
            let database = fixture.database
            for index in 0..<5 { try await under(Self.bob) { try await Self.insert(database, "bob-\(index)") } }
            // Bob stores text in his role's defaults, and runs a statement Alice's SQL looks for.
            try await under(Self.bob) {
                try await database.withTransaction { connection in
                    try await connection.run(sql: "ALTER ROLE CURRENT_USER SET application_name = 'bob-secret'")
                }
            }
            let bobPID = NIOLockedValueBox<Int32?>(nil)
            let bobRequest = Task {
                try await under(Self.bob) {
                    try await database.withTransaction { connection in
                        let pid = try await connection.values("SELECT pg_backend_pid()", as: Int32.self).first
                        bobPID.withLockedValue { $0 = pid }
                        try await connection.run(sql: "SELECT 'bob-literal-secret', pg_sleep(2)")
                    }
                }
            }
            while bobPID.withLockedValue({ $0 }) == nil { try await Task.sleep(for: .milliseconds(20)) }
            let pid = try #require(bobPID.withLockedValue { $0 })
            try await expectRefused(database, under: Self.alice, [
                "SELECT query FROM pg_stat_activity",
                "SELECT n_tup_ins FROM pg_stat_user_tables",
                "SELECT reltuples FROM pg_class",
                "SELECT pg_relation_size(oid) FROM pg_class WHERE relkind = 'r'",
                "SELECT * FROM pg_locks",
                "SELECT rolconfig FROM pg_roles",
                "SELECT useconfig FROM pg_user",
                "SELECT setconfig FROM pg_db_role_setting",
                "SELECT pg_current_wal_insert_lsn()",
                "SELECT pg_xact_status(pg_current_xact_id())",
                "SELECT pg_database_size(current_database())",
                "SELECT lo_from_bytea(0, 'x')",
                "SELECT pg_cancel_backend(\(pid))",
                "SELECT pg_terminate_backend(\(pid))",
            ])
            // Alice's own planner counts cover Alice's rows only.
            let plan = try await under(Self.alice) {
                try await database.withTransaction { connection in
                    try await connection.values("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) SELECT * FROM documents", as: String.self)
                }
            }
            #expect(!plan.contains { $0.contains("Rows Removed") })
            try await bobRequest.value
        }

        @Test("defaults a tenant's SQL sets on its own role (idle timeout, read-only) do not stop the runtime's sessions")
        func ownRoleDefaultsDoNotStopTheRuntime() async throws {
            let fixture = try await TenantRoleFixture.make(tenants: Self.tenants)
            for setting in ["idle_session_timeout = '1ms'", "default_transaction_read_only = on", "statement_timeout = '1ms'"] {
                try await under(Self.alice) {
                    try await fixture.database.withTransaction { connection in
                        try await connection.run(sql: "ALTER ROLE CURRENT_USER SET \(setting)")
                    }
                }
            }
            // A new instance, so that its pool's connections start afresh under those defaults.
            let fresh = try TenantDatabase(
                tenantRoles: fixture.roles, policies: fixture.policies, secret: fixture.secret,
                protectedTables: TenantRoleFixture.tables)
            try await fresh.verify()
            try await under(Self.alice) { try await Self.insert(fresh, "still writes") }
            try await Task.sleep(for: .milliseconds(50))
            #expect(try await under(Self.alice) { try await Self.visible(fresh) } == ["contoso.com/still writes"])
        }

        @Test("a tenant spelled composed or decomposed is one role and one schema")
        func canonicalTenantNames() async throws {
            let composed = TenantID("b\u{00FC}cher.example")
            let fixture = try await TenantRoleFixture.make(tenants: [composed])
            #expect(fixture.roles.name(for: composed) == fixture.roles.name(for: TenantID("BU\u{0308}CHER.example")))
            #expect(fixture.roles.password(for: composed) == fixture.roles.password(for: TenantID("bu\u{0308}cher.example")))
            try await under(Identity("ana@b\u{00FC}cher.example")) { try await Self.insert(fixture.database, "shared") }
            #expect(try await under(Identity("eva@bu\u{0308}cher.example")) { try await Self.visible(fixture.database) }
                == ["b\u{00FC}cher.example/shared"])
        }

        @Test("pools are bounded: an idle one is closed to make room, and a tenant beyond the bound while all are busy is refused")
        func boundedPools() async throws {
            let fixture = try await TenantRoleFixture.make(tenants: Self.tenants, maximumPools: 1)
            let database = fixture.database
            try await under(Self.alice) { try await Self.insert(database, "a1") }
            try await under(Self.bob) { try await Self.insert(database, "b1") }
            #expect(try await under(Self.alice) { try await Self.visible(database) } == ["contoso.com/a1"])
            let holding = NIOLockedValueBox(false)
            let release = NIOLockedValueBox(false)
            let alice = Task {
                try await under(Self.alice) {
                    try await database.withTransaction { _ in
                        holding.withLockedValue { $0 = true }
                        while !release.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
                    }
                }
            }
            while !holding.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
            await #expect(throws: TenantDatabaseError.unavailable(reason: "all 1 tenant pools are in use")) {
                try await under(Self.bob) { try await Self.visible(database) }
            }
            release.withLockedValue { $0 = true }
            try await alice.value
            #expect(try await under(Self.bob) { try await Self.visible(database) } == ["fabrikam.com/b1"])
        }

        @Test("a tenant role that reaches past its schema is refused before its first transaction")
        func unsafeTenantRoleIsRefused() async throws {
            let fixture = try await TenantRoleFixture.make(tenants: Self.tenants)
            let aliceRole = fixture.roles.name(for: TenantID("contoso.com"))
            let bobSchema = fixture.roles.name(for: TenantID("fabrikam.com"))
            let cases: [(change: String, undo: String)] = [
                ("GRANT USAGE ON SCHEMA \(bobSchema) TO \(aliceRole)", "REVOKE USAGE ON SCHEMA \(bobSchema) FROM \(aliceRole)"),
                ("GRANT \(bobSchema) TO \(aliceRole)", "REVOKE \(bobSchema) FROM \(aliceRole)"),
                ("ALTER ROLE \(aliceRole) BYPASSRLS", "ALTER ROLE \(aliceRole) NOBYPASSRLS"),
                ("GRANT CREATE ON SCHEMA public TO \(aliceRole)", "REVOKE CREATE ON SCHEMA public FROM \(aliceRole)"),
                ("GRANT EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) TO \(aliceRole)",
                 "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) FROM \(aliceRole)"),
                ("GRANT SELECT ON pg_catalog.pg_class TO \(aliceRole)", "REVOKE SELECT ON pg_catalog.pg_class FROM \(aliceRole)"),
                ("ALTER TABLE \(aliceRole).documents OWNER TO \(aliceRole)",
                 "DO $$ BEGIN ALTER TABLE \(aliceRole).documents OWNER TO \(fixture.owner); GRANT SELECT, INSERT, UPDATE, DELETE ON \(aliceRole).documents TO \(aliceRole); END $$"),
            ]
            for (change, undo) in cases {
                do {
                    try await fixture.superuser { try await $0.run(sql: change) }
                } catch {
                    Issue.record("\(change): \(String(reflecting: error))")
                    continue
                }
                // A new instance: its pools have not checked their roles yet.
                let fresh = try TenantDatabase(
                    tenantRoles: fixture.roles, policies: fixture.policies, secret: fixture.secret,
                    protectedTables: TenantRoleFixture.tables)
                try await fresh.verify()
                do {
                    _ = try await under(Self.alice) { try await Self.visible(fresh) }
                    Issue.record("accepted after: \(change)")
                } catch let error as TenantDatabaseError {
                    guard case .unsafeConfiguration = error else {
                        Issue.record("\(change): \(error)")
                        try await fixture.superuser { try await $0.run(sql: undo) }
                        continue
                    }
                }
                // Bob's tenant is unaffected; Alice's is served again once the change is undone.
                do {
                    #expect(try await under(Self.bob) { try await Self.visible(fresh) }.isEmpty)
                    try await fixture.superuser { try await $0.run(sql: undo) }
                    let again = try TenantDatabase(
                        tenantRoles: fixture.roles, policies: fixture.policies, secret: fixture.secret,
                        protectedTables: TenantRoleFixture.tables)
                    try await again.verify()
                    #expect(try await under(Self.alice) { try await Self.visible(again) }.isEmpty)
                } catch {
                    Issue.record("after \(change): \(String(reflecting: error))")
                }
            }
        }

        @Test("a tenant's rows move from the shared table into its schema, all or none")
        func movingRowsIntoTheTenantSchema() async throws {
            let fixture = try await TenantRoleFixture.make(tenants: Self.tenants)
            try await fixture.superuser { connection in
                try await connection.run(sql: "CREATE TABLE shared_documents (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL, body text NOT NULL)")
                try await connection.run(sql: "INSERT INTO shared_documents (tenant, body) VALUES ('contoso.com', 'c1'), ('fabrikam.com', 'f1'), ('contoso.com', 'c2')")
            }
            let moved = try await fixture.superuser { connection in
                try await TenantDatabase.moveRows(
                    of: TenantID("Contoso.com"), roles: fixture.roles, from: "shared_documents", tenantColumn: "tenant",
                    to: "documents", on: connection, logger: TestDatabase.logger)
            }
            #expect(moved == 2)
            #expect(try await under(Self.alice) { try await Self.visible(fixture.database) } == ["contoso.com/c1", "contoso.com/c2"])
            let left = try await fixture.superuser { connection in
                try await connection.values("SELECT tenant || '/' || body FROM shared_documents ORDER BY id", as: String.self)
            }
            #expect(left == ["fabrikam.com/f1"])
            // A target table that does not match fails whole: nothing moves.
            await #expect(throws: TenantDatabaseError.self) {
                try await fixture.superuser { connection in
                    try await TenantDatabase.moveRows(
                        of: TenantID("fabrikam.com"), roles: fixture.roles, from: "shared_documents", tenantColumn: "tenant",
                        to: "notes", on: connection, logger: TestDatabase.logger)
                }
            }
            let still = try await fixture.superuser { connection in
                try await connection.values("SELECT count(*)::int FROM shared_documents", as: Int.self)
            }
            #expect(still == [1])
        }
    }
}
