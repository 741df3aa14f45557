import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

extension FleetTests {
    @Suite("TenantDatabase under load")
    struct TenantDatabaseConcurrencyTests {
        /// 10 s in the landing lane; 30 s with IDENTITY_LONG_TESTS=1 (or LONG_TESTS=1).
        static var duration: Duration {
            let environment = ProcessInfo.processInfo.environment
            return environment["IDENTITY_LONG_TESTS"] == "1" || environment["LONG_TESTS"] == "1" ? .seconds(30) : .seconds(10)
        }

        struct Tally: Sendable {
            var transactions = 0
            var rowsChecked = 0
            var foreignRows: [String] = []
            /// Transactions PostgreSQL ended for a deadlock between two writers of one tenant (40P01): rolled back
            /// whole, as the audit checks.
            var deadlocks = 0
        }

        /// 64 accounts in 8 tenants, each running transactions until `Self.duration` passed: two inserts, a read of 40
        /// rows, an update of 5, a read of 20 notes, every row read checked against the caller's tenant (and account).
        static func runLoad(_ database: TenantDatabase, documents: String, notes: String) async throws -> (Tally, Duration) {
            let accounts = (0..<64).map { Identity("user\($0)@tenant\($0 % 8).example") }
            let tally = NIOLockedValueBox(Tally())
            let clock = ContinuousClock()
            let started = clock.now
            let deadline = started + Self.duration
            let insertDocument = "INSERT INTO \(documents) (body) VALUES ($1)"
            let insertNote = "INSERT INTO \(notes) (body) VALUES ($1)"
            let readDocuments = "SELECT tenant FROM \(documents) ORDER BY id DESC LIMIT 40"
            // SKIP LOCKED: writers of one tenant never wait for each other.
            let update = """
                UPDATE \(documents) SET body = body WHERE id IN (
                    SELECT id FROM \(documents) ORDER BY id DESC LIMIT 5 FOR UPDATE SKIP LOCKED)
                RETURNING tenant
                """
            let readNotes = "SELECT tenant || ' ' || account FROM \(notes) ORDER BY id DESC LIMIT 20"
            try await withThrowingTaskGroup(of: Void.self) { group in
                for account in accounts {
                    group.addTask {
                        let tenant = "tenant\(account.name.split(separator: "tenant").last!)"
                        let name = account.foldedName
                        var round = 0
                        while clock.now < deadline {
                            round += 1
                            var binds = PostgresBindings()
                            binds.append("\(name) \(round)")
                            let outcome: ([String], [String])
                            do {
                                outcome = try await under(account) {
                                    try await database.withTransaction { connection in
                                        try await connection.run(PostgresQuery(unsafeSQL: insertDocument, binds: binds))
                                        try await connection.run(PostgresQuery(unsafeSQL: insertNote, binds: binds))
                                        // Unscoped on purpose: the database answers this tenant's rows only.
                                        let seen: [String] = try await connection.values(PostgresQuery(unsafeSQL: readDocuments))
                                        let changed: [String] = try await connection.values(PostgresQuery(unsafeSQL: update))
                                        let notes: [String] = try await connection.values(PostgresQuery(unsafeSQL: readNotes))
                                        return (seen + changed, notes)
                                    }
                                }
                            } catch let error as PSQLError where sqlState(of: error) == "40P01" {
                                tally.withLockedValue { $0.deadlocks += 1 }
                                continue
                            }
                            let (seen, notes) = outcome
                            let foreign = seen.filter { $0 != tenant } + notes.filter { $0 != "\(tenant) \(name)" }
                            tally.withLockedValue {
                                $0.transactions += 1
                                $0.rowsChecked += seen.count + notes.count
                                $0.foreignRows += foreign
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            return (tally.withLockedValue { $0 }, clock.now - started)
        }

        static func report(_ mode: String, _ result: Tally, _ elapsed: Duration, audited: Int) {
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("TenantDatabase load (\(mode)): \(result.transactions) transactions (\(String(format: "%.0f", Double(result.transactions) / seconds))/s) in \(String(format: "%.1f", seconds)) s, \(result.rowsChecked) rows read and checked, \(audited) rows audited, \(result.deadlocks) deadlocks retried, 0 of another tenant")
        }

        @Test("64 accounts in 8 tenants read and write concurrently: every row read or written is the caller's tenant's (and account's)")
        func sixtyFourAccounts() async throws {
            let fixture = try await TenantFixture.make(maximumConnections: 16)
            defer { fixture.shutdown() }
            let (result, elapsed) = try await Self.runLoad(fixture.database, documents: "app.documents", notes: "app.notes")
            #expect(result.foreignRows.isEmpty, "rows of another tenant: \(result.foreignRows.prefix(5))")
            #expect(result.transactions >= 64)
            // Every row written: its tenant (and account) are those of the account that wrote it.
            var audited = 0
            for row in try await fixture.allRows("app.documents") + fixture.allRows("app.notes") {
                audited += 1
                let writer = Identity(String(row.body.split(separator: " ").first!))
                #expect(row.tenant == fixture.policies.tenant(for: writer).rawValue.lowercased(), "\(row)")
                if !row.account.isEmpty { #expect(row.account == writer.foldedName, "\(row)") }
            }
            #expect(audited == 2 * result.transactions, "\(result.deadlocks) deadlocks")
            Self.report("row-level security", result, elapsed, audited: audited)
        }

        @Test("role per tenant: 64 accounts in 8 tenants, every row read or written is the caller's tenant's and lies in its schema")
        func sixtyFourAccountsRolePerTenant() async throws {
            let tenants = (0..<8).map { TenantID("tenant\($0).example") }
            let fixture = try await TenantRoleFixture.make(tenants: tenants, maximumPools: 8, connectionsPerPool: 2)
            let (result, elapsed) = try await Self.runLoad(fixture.database, documents: "documents", notes: "notes")
            #expect(result.foreignRows.isEmpty, "rows of another tenant: \(result.foreignRows.prefix(5))")
            #expect(result.transactions >= 64)
            var audited = 0
            for row in try await fixture.allRows("documents") + fixture.allRows("notes") {
                audited += 1
                let writer = Identity(String(row.body.split(separator: " ").first!))
                #expect(row.tenant == row.schemaTenant, "\(row)")
                #expect(row.tenant == fixture.policies.tenant(for: writer).rawValue.lowercased(), "\(row)")
                if !row.account.isEmpty { #expect(row.account == writer.foldedName, "\(row)") }
            }
            #expect(audited == 2 * result.transactions, "\(result.deadlocks) deadlocks")
            Self.report("role per tenant", result, elapsed, audited: audited)
        }
    }
}
