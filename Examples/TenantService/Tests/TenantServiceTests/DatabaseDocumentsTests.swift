import AsyncHTTPClient
import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import TenantServiceKit
import Testing

/// The server the database tests use: libpq's variables, as `Integrations/IdentityPostgres/scripts/with-postgres.sh`
/// exports them; the suite is skipped, with the reason shown, when `PGHOST` is not set.
enum TestDatabase {
    static let server = PostgresFleetConfiguration.fromEnvironment()

    static var isConfigured: Bool { server != nil }

    static let skipReason: Comment = """
        no PostgreSQL configured (PGHOST unset): run ../../Integrations/IdentityPostgres/scripts/with-postgres.sh swift test \
        to test against a throwaway server
        """

    static let logger = Logger(label: "tenant-service-tests") { _ in SwiftLogNoOpLogHandler() }

    /// Every row of the documents table as the administrator (a superuser: row-level security does not hold for
    /// it) sees them in `documents`' database: what is really stored.
    static func allRows(_ documents: DatabaseDocuments) async throws -> [DatabaseRow] {
        let server = try #require(server)
        let configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: server.username, password: server.password,
            database: documents.databaseName, tls: .disable)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        var rows: [DatabaseRow] = []
        do {
            let sequence = try await connection.query("SELECT tenant, account, name FROM tenant_docs.documents", logger: logger)
            for try await (tenant, account, name) in sequence.decode((String, String, String).self) {
                rows.append(DatabaseRow(tenant: tenant, account: account, name: name))
            }
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        return rows
    }
}

/// Runs `body` against both services with the PostgreSQL document store, live on loopback, then stops them and
/// removes the store's database.
func withDatabaseServices(_ body: @escaping @Sendable (Client, DatabaseDocuments) async throws -> Void) async throws {
    let server = try #require(TestDatabase.server)
    let services = try TenantServices(database: server)
    let documents = try #require(services.databaseDocuments)
    let http = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
        try await services.withRunningServices { base, _ in
            try await body(Client(http: http, base: base, services: services), documents)
        }
    } catch {
        try await http.shutdown()
        try await services.shutDown()
        throw error
    }
    try await http.shutdown()
    try await services.shutDown()
}

/// A path segment with every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) percent-encoded.
func pathSegment(_ text: String) -> String {
    var unreserved = CharacterSet(charactersIn: "-._~")
    unreserved.formUnion(CharacterSet(charactersIn: "a"..."z"))
    unreserved.formUnion(CharacterSet(charactersIn: "A"..."Z"))
    unreserved.formUnion(CharacterSet(charactersIn: "0"..."9"))
    return text.addingPercentEncoding(withAllowedCharacters: unreserved)!
}

let dave = Tenants.account(tenant: 2, user: 0)          // t2

@Suite("TenantService: documents in PostgreSQL, under row-level security", .enabled(if: TestDatabase.isConfigured, TestDatabase.skipReason))
struct DatabaseDocumentsTests {
    @Test("another tenant's document is not found (404, no body), on /v1 and /reusable; a colleague's is served; writing as another account is refused")
    func crossTenantRead() async throws {
        try await withDatabaseServices { client, documents in
            let written = try await client.send(.PUT, "/v1/db/docs/\(alice.name)/memo", as: alice, body: "\(alice.name)|secret")
            #expect(written.status == 200)
            #expect(written.report?.rows == [DatabaseRow(tenant: "t0.example", account: alice.name, name: "memo")])
            #expect(written.report?.hops.allSaw(alice.name) == true)
            // The row is there, in t0: what carol does not get is the database's refusal, not a missing row.
            #expect(try await TestDatabase.allRows(documents).contains(DatabaseRow(tenant: "t0.example", account: alice.name, name: "memo")))

            for prefix in ["/v1", "/reusable"] {
                let stranger = try await client.send(.GET, "\(prefix)/db/docs/\(alice.name)/memo", as: carol)
                #expect(stranger.status == 404)
                #expect(stranger.contentType == "application/problem+json")
                #expect(stranger.report?.code == "not-found")
                #expect(stranger.report?.content == nil)
                #expect(stranger.report?.rows == nil)
                #expect(!stranger.text.contains("secret"))
                #expect(stranger.report?.hops.allSaw(carol.name) == true)

                let colleague = try await client.send(.GET, "\(prefix)/db/docs/\(alice.name)/memo", as: bob)
                #expect(colleague.status == 200)
                #expect(colleague.report?.content == "\(alice.name)|secret")
                #expect(colleague.report?.rows == [DatabaseRow(tenant: "t0.example", account: alice.name, name: "memo")])
            }

            // A colleague may read alice's document but not write it: refused before the database.
            let intrusion = try await client.send(.PUT, "/v1/db/docs/\(alice.name)/memo", as: bob, body: "\(bob.name)|overwrite")
            #expect(intrusion.status == 403)
            #expect(intrusion.report?.code == "not-your-account")
            #expect(try await client.send(.GET, "/v1/db/docs/\(alice.name)/memo", as: alice).report?.content == "\(alice.name)|secret")
        }
    }

    @Test("the unscoped listing (no WHERE) answers the caller's tenant's rows only, with three tenants' rows in the table")
    func unscopedListing() async throws {
        try await withDatabaseServices { client, documents in
            for account in [alice, bob, carol, dave] {
                for name in ["a", "b"] {
                    #expect(try await client.send(.PUT, "/v1/db/docs/\(account.name)/\(name)", as: account, body: "\(account.name)|\(name)").status == 200)
                }
            }
            let stored = try await TestDatabase.allRows(documents)
            #expect(stored.count == 8)
            #expect(Set(stored.map(\.tenant)) == ["t0.example", "t1.example", "t2.example"])

            for (account, prefix) in [(alice, "/v1"), (bob, "/reusable"), (carol, "/v1"), (dave, "/reusable")] {
                let tenant = "t\(Tenants.tenantIndex(of: account)!).example"
                let listing = try await client.send(.GET, "\(prefix)/db/docs", as: account)
                #expect(listing.status == 200)
                let rows = try #require(listing.report?.rows)
                #expect(rows.allSatisfy { $0.tenant == tenant }, "\(account.name) saw \(rows)")
                #expect(Set(rows) == Set(stored.filter { $0.tenant == tenant }))
                #expect(listing.report?.hops.allSaw(account.name) == true)
            }
        }
    }

    @Test("no identity, the unmanaged identity and a blocked account are refused before the database is asked", arguments: [
        Identity?.none, Identity.unmanaged, carol,
    ])
    func refusedBeforeTheDatabase(identity: Identity?) async throws {
        try await withDatabaseServices { client, documents in
            #expect(try await client.send(.PUT, "/v1/db/docs/\(carol.name)/kept", as: carol, body: "\(carol.name)|kept").status == 200)
            let policies = client.services.policies
            let expected: TenantDatabaseError
            switch identity {
            case nil: expected = .noIdentity
            case .unmanaged?: expected = .unmanagedIdentity
            case let account?:
                policies.blockAccount(account, reason: .blockedByAdministrator)
                expected = .accountBlocked(account, reason: .blockedByAdministrator)
            }
            // TenantDatabase decides these from the identity alone: no connection is leased, no statement sent.
            #expect(throws: expected) {
                try IdentityContext.withThreadIdentity(identity) { try documents.database.currentBinding() }
            }
            await #expect(throws: expected) {
                try await IdentityContext.withThreadIdentity(identity) { try await documents.list() }
            }
            await #expect(throws: expected) {
                try await IdentityContext.withThreadIdentity(identity) { try await documents.put(name: "x", body: "x") }
            }
            if let account = identity, !account.isUnmanaged {
                // Admission refuses the blocked account on /v1; /plain takes any account from a header unverified,
                // and the store refuses it there.
                let admitted = try await client.send(.GET, "/v1/db/docs", as: account)
                #expect(admitted.status == 403)
                #expect(admitted.text.contains(#""code":"account-blocked""#))
                let plain = try await client.send(.GET, "/plain/db/docs", as: nil, headers: [("x-identity-account", account.name)])
                #expect(plain.status == 403)
                #expect(plain.report?.code == "account-blocked")
                #expect(plain.report?.rows == nil)
            }
            // Nothing was written by the refused calls.
            #expect(try await TestDatabase.allRows(documents) == [DatabaseRow(tenant: "t1.example", account: carol.name, name: "kept")])
        }
    }

    @Test("names with quotes, %, _, backslashes and non-ASCII are stored and read back literally, never as patterns")
    func literalNames() async throws {
        let names = [
            "it's \"quoted\"", "100%_done", "%", "_", "back\\slash", "naïve – 東京 📄", "a'; DROP TABLE tenant_docs.documents; --",
            "slash/inside", "Straße", "STRASSE",
        ]
        try await withDatabaseServices { client, documents in
            for name in names {
                let answer = try await client.send(.PUT, "/v1/db/docs/\(alice.name)/\(pathSegment(name))", as: alice, body: "body of \(name)")
                #expect(answer.status == 200, "\(name): \(answer.text)")
                #expect(answer.report?.rows?.first?.name == name)
            }
            for name in names {
                let read = try await client.send(.GET, "/v1/db/docs/\(alice.name)/\(pathSegment(name))", as: alice)
                #expect(read.status == 200)
                #expect(read.report?.content == "body of \(name)")
                #expect(read.report?.rows == [DatabaseRow(tenant: "t0.example", account: alice.name, name: name)])
            }
            // "%" and "_" are not wildcards: a name that only a LIKE pattern would match is not found.
            #expect(try await client.send(.GET, "/v1/db/docs/\(alice.name)/\(pathSegment("100x_done"))", as: alice).status == 404)
            #expect(try await client.send(.GET, "/v1/db/docs/\(alice.name)/\(pathSegment("1%"))", as: alice).status == 404)
            let stored = try await TestDatabase.allRows(documents).map(\.name)
            #expect(Set(stored) == Set(names))
            let listed = try await client.send(.GET, "/v1/db/docs", as: bob)
            #expect(Set(listed.report?.rows?.map(\.name) ?? []) == Set(names))
            // A control character (here NUL, which PostgreSQL text cannot hold) is refused before the database.
            #expect(try await client.send(.PUT, "/v1/db/docs/\(alice.name)/a%00b", as: alice, body: "x").status == 400)
        }
    }
}

@Suite("TenantService without a database")
struct NoDatabaseTests {
    @Test("the /db routes answer 503 database-not-configured on every prefix; the file routes work as before")
    func refusedWithoutDatabase() async throws {
        try await withServices { client in
            #expect(client.services.databaseDocuments == nil)
            for prefix in ["/v1", "/reusable"] {
                for (method, path) in [(HTTPMethod.PUT, "/db/docs/\(alice.name)/x"), (.GET, "/db/docs/\(alice.name)/x"), (.GET, "/db/docs")] {
                    let answer = try await client.send(method, prefix + path, as: alice, body: method == .PUT ? "x" : nil)
                    #expect(answer.status == 503)
                    #expect(answer.contentType == "application/problem+json")
                    #expect(answer.report?.code == "database-not-configured")
                    #expect(answer.report?.rows == nil)
                }
            }
            let plain = try await client.send(.GET, "/plain/db/docs", as: nil, headers: [("x-identity-account", bob.name)])
            #expect(plain.status == 503)
            #expect(try await client.send(.PUT, "/v1/docs/\(alice.name)/x", as: alice, body: "\(alice.name)|x").status == 200)
        }
    }
}
