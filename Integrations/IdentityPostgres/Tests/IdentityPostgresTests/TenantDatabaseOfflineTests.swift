import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityRuntime
import IdentityTesting
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@Suite("TenantDatabase (without a database)")
struct TenantDatabaseOfflineTests {
    /// A database over a pool that can never connect (port 1): a transaction that reached the pool would fail
    /// with `.unavailable`, so any other refusal was decided before the database was asked.
    static func unreachable(_ policies: PolicyManager) throws -> (TenantDatabase, Task<Void, Never>) {
        var settings = PostgresClient.Configuration(host: "127.0.0.1", port: 1, username: "nobody", password: nil, database: "none", tls: .disable)
        settings.options.connectTimeout = .milliseconds(200)
        let client = PostgresClient(configuration: settings, backgroundLogger: TestDatabase.logger)
        let runner = Task { await client.run() }
        let database = try TenantDatabase(
            client: client, policies: policies, secret: .generate(), protectedTables: ["documents"])
        return (database, runner)
    }

    /// The refusal `withTransaction` throws under `identity` (`.some(nil)`: no thread identity), and whether the
    /// body ran.
    static func refusal(_ database: TenantDatabase, under identity: Identity?) async -> (TenantDatabaseError?, bodyRan: Bool) {
        let ran = NIOLockedValueBox(false)
        do {
            try await IdentityContext.withThreadIdentity(identity) {
                try await database.withTransaction { _ in ran.withLockedValue { $0 = true } }
            }
            return (nil, ran.withLockedValue { $0 })
        } catch {
            return (error as? TenantDatabaseError, ran.withLockedValue { $0 })
        }
    }

    @Test("no identity, \"\", an unloaded policy, a blocked or disallowed account, a NUL, no verify(): refused before the database is asked")
    func refusalsBeforeTheDatabase() async throws {
        #expect(IdentityContext.processIdentity == nil)
        let policies = PolicyManager()
        let (database, runner) = try Self.unreachable(policies)
        defer { runner.cancel() }
        #expect(await Self.refusal(database, under: nil) == (.noIdentity, false))
        #expect(await Self.refusal(database, under: .unmanaged) == (.unmanagedIdentity, false))
        #expect(await Self.refusal(database, under: Identity("   ")) == (.unmanagedIdentity, false))
        let mallory = Identity("mallory@contoso.com")
        policies.blockAccount(mallory, reason: .blockedByAdministrator)
        #expect(await Self.refusal(database, under: mallory) == (.accountBlocked(mallory, reason: .blockedByAdministrator), false))
        #expect(await Self.refusal(database, under: Identity("nul\u{0}@contoso.com")) == (.unrepresentableName("nul\u{0}@contoso.com"), false))
        // A registered tenant ID that reads like a domain-less account's own tenant.
        policies.registerAccount("eve@contoso.com", tenantID: "svc-backup@")
        #expect(await Self.refusal(database, under: "eve@contoso.com") == (.unrepresentableName("svc-backup@"), false))
        // Everything about the caller is fine: still refused until verify() succeeded.
        #expect(await Self.refusal(database, under: "alice@contoso.com") == (.notVerified, false))
        var settings = policies.settings
        settings.allowedAccounts = ["bob@contoso.com"]
        policies.settings = settings
        #expect(await Self.refusal(database, under: "alice@contoso.com") == (.accountNotAllowed("alice@contoso.com"), false))

        let late = LatePolicySource()
        let undecided = PolicyManager(policySource: late)
        let (waiting, waitingRunner) = try Self.unreachable(undecided)
        defer { waitingRunner.cancel() }
        let (error, ran) = await Self.refusal(waiting, under: "alice@contoso.com")
        #expect(!ran)
        guard case .policyUnavailable? = error else {
            Issue.record("an unloaded policy source gave \(String(describing: error))")
            return
        }
        late.load()
        #expect(await Self.refusal(waiting, under: "alice@contoso.com") == (.notVerified, false))
    }

    @Test("the binding is the case-folded account and tenant; a domain-less account has a tenant of its own")
    func bindingValues() throws {
        let policies = PolicyManager()
        let (database, runner) = try Self.unreachable(policies)
        defer { runner.cancel() }
        let alice = try database.binding(for: Identity("Alice@Contoso.COM"))
        #expect(alice.boundAccount == "alice@contoso.com")
        #expect(alice.boundTenant == "contoso.com")
        #expect(alice.tenant == TenantID("contoso.com"))
        let service = try database.binding(for: Identity("svc-Backup"))
        #expect(service.boundTenant == "svc-backup@")
        policies.registerAccount("bob@contoso.com", tenantID: "72F988BF-86F1")
        #expect(try database.binding(for: Identity("bob@contoso.com")).boundTenant == "72f988bf-86f1")
        #expect(throws: TenantDatabaseError.noIdentity) { try database.binding(for: nil) }
        #expect(throws: TenantDatabaseError.noIdentity) { try database.currentBinding() }
        let current = try IdentityContext.withThreadIdentity("Carol@Contoso.com") { try database.currentBinding() }
        #expect(current.boundAccount == "carol@contoso.com")
    }

    @Test("rowLevelSecurity: ENABLE, FORCE, a permissive and a restrictive policy, names quoted; odd names refused")
    func rowLevelSecurityStatements() throws {
        let statements = try TenantDatabase.rowLevelSecurity(table: "app.Documents", tenantColumn: "tenant_id", accountColumn: "owner")
        #expect(statements.contains(#"ALTER TABLE "app"."Documents" ENABLE ROW LEVEL SECURITY"#))
        #expect(statements.contains(#"ALTER TABLE "app"."Documents" FORCE ROW LEVEL SECURITY"#))
        let condition = #"("tenant_id" = (SELECT identity_rls.current_tenant()) AND "owner" = (SELECT identity_rls.current_account()))"#
        #expect(statements.contains(
            #"CREATE POLICY "identity_tenant" ON "app"."Documents" AS PERMISSIVE FOR ALL TO PUBLIC USING \#(condition) WITH CHECK \#(condition)"#))
        #expect(statements.contains(
            #"CREATE POLICY "identity_tenant_guard" ON "app"."Documents" AS RESTRICTIVE FOR ALL TO PUBLIC USING \#(condition) WITH CHECK \#(condition)"#))
        let tenantOnly = try TenantDatabase.rowLevelSecurity(table: "documents", tenantColumn: "tenant")
        #expect(!tenantOnly.joined().contains("current_account"))
        let odd = [
            "", "docs; DROP TABLE x", #"do"cs"#, "a.b.c", ".docs", "docs.", "1docs", "$docs", "docs table", "dócs",
            "docs\n", String(repeating: "a", count: 64), "tenant--", "a'b",
        ]
        for name in odd {
            #expect(throws: TenantDatabaseError.invalidIdentifier(name)) {
                try TenantDatabase.rowLevelSecurity(table: name, tenantColumn: "tenant")
            }
            #expect(throws: TenantDatabaseError.self) {
                try TenantDatabase.rowLevelSecurity(table: "documents", tenantColumn: name)
            }
            #expect(throws: TenantDatabaseError.self) {
                try TenantDatabase.rowLevelSecurity(table: "documents", tenantColumn: "tenant", accountColumn: name)
            }
            #expect(throws: TenantDatabaseError.self) { try TenantDatabase.installationStatements(serviceRole: name) }
        }
        #expect(throws: TenantDatabaseError.invalidIdentifier("no such")) {
            try TenantDatabase(client: PostgresClient(
                configuration: .init(host: "127.0.0.1", username: "x", password: nil, database: nil, tls: .disable),
                backgroundLogger: TestDatabase.logger), policies: PolicyManager(), secret: .generate(), protectedTables: ["no such"])
        }
        #expect(try TenantDatabase.rowLevelSecurity(table: String(repeating: "a", count: 63), tenantColumn: "t").count == 6)
    }

    @Test("binding secret: 32 random bytes, base64 both ways, other lengths refused, description redacted")
    func bindingSecret() throws {
        let secret = TenantDatabase.BindingSecret.generate()
        #expect(try TenantDatabase.BindingSecret(base64: secret.base64) == secret)
        #expect(secret != TenantDatabase.BindingSecret.generate())
        #expect(Data(base64Encoded: secret.base64)?.count == 32)
        #expect(!String(describing: secret).contains(secret.base64))
        #expect(throws: TenantDatabaseError.self) { try TenantDatabase.BindingSecret(base64: Data(count: 16).base64EncodedString()) }
        #expect(throws: TenantDatabaseError.self) { try TenantDatabase.BindingSecret(base64: "not base64") }
    }
}
