import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("A tenant's wipe finds the accounts that have only keys", .exclusiveProcessIdentity)
struct TenantWipeKeyTests {
    static let keysOnly: Identity = "yan@contoso.com"

    @Test("an account of the tenant the manager never knew, with an envelope and no file: its keys are destroyed, other tenants' stay")
    func accountWithOnlyKeysIsWiped() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let envelope = try f.data.protect(Data("only an envelope".utf8), owner: Self.keysOnly)
        let carolsEnvelope = try f.data.protect(Data("carol's".utf8), owner: carol)
        #expect(try f.keys.identitiesWithKeys()?.contains(Self.keysOnly) == true)

        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account) == [alice, Self.keysOnly])
        #expect(try f.keys.identitiesWithKeys() == [carol])
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(Self.keysOnly) { try f.data.unprotect(envelope) }
        }
        #expect(try IdentityContext.withThreadIdentity(carol) { try f.data.unprotect(carolsEnvelope) } == Data("carol's".utf8))
    }

    @Test("a key file the search cannot read makes the tenant's wipe incomplete; the accounts it found are still wiped")
    func unreadableKeyFileMakesTheWipeIncomplete() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let malformed = f.keys.directory + "/" + String(repeating: "c", count: 64) + ".key"
        try Data("not json".utf8).write(to: URL(fileURLWithPath: malformed))

        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(!report.isComplete)
        #expect(report.leftovers.map(\.path) == [f.keys.directory])
        #expect(report.error == .ioFailure(path: malformed, operation: "read key file (malformed)", errno: EIO))
        #expect(report.accounts.map(\.account) == [alice])
        #expect(try f.files.ownersUnderRoots().isEmpty)
    }
}
