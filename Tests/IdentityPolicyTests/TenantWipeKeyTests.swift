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
        #expect(try f.keys.identitiesWithKeys()?.identities.contains(Self.keysOnly) == true)

        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account) == [alice, Self.keysOnly])
        #expect(try f.keys.identitiesWithKeys()?.identities == [carol])
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(Self.keysOnly) { try f.data.unprotect(envelope) }
        }
        #expect(try IdentityContext.withThreadIdentity(carol) { try f.data.unprotect(carolsEnvelope) } == Data("carol's".utf8))
    }

    @Test("a key file the search cannot read makes the tenant's wipe incomplete; the accounts it found, keys-only ones too, are still wiped")
    func unreadableKeyFileMakesTheWipeIncomplete() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let envelope = try f.data.protect(Data("only an envelope".utf8), owner: Self.keysOnly)
        let malformed = f.keys.directory + "/" + String(repeating: "c", count: 64) + ".key"
        try Data("not json".utf8).write(to: URL(fileURLWithPath: malformed))

        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(!report.isComplete)
        #expect(report.leftovers.map(\.path) == [malformed])
        #expect(report.error == .ioFailure(path: malformed, operation: "read key file (malformed)", errno: EIO))
        #expect(report.accounts.map(\.account) == [alice, Self.keysOnly])
        #expect(try f.files.ownersUnderRoots().isEmpty)
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(Self.keysOnly) { try f.data.unprotect(envelope) }
        }
    }

    @Test("a destruction cut short (a key file of zeros, of another tenant's account) hides nothing: the tenant's keys-only account is wiped, the report complete")
    func zeroFilledKeyFileHidesNothing() async throws {
        let f = try IsolationFixture()
        let envelope = try f.data.protect(Data("only an envelope".utf8), owner: Self.keysOnly)
        let gone: Identity = "zed@fabrikam.com"
        _ = try f.data.protect(Data("fabrikam".utf8), owner: gone)
        // destroyKeys(for: zed) overwrote the file with zeros, then the process died before the unlink.
        let zedFile = try #require(try FileManager.default.contentsOfDirectory(atPath: f.keys.directory).first { name in
            (try? String(contentsOfFile: f.keys.directory + "/" + name, encoding: .utf8))?.contains(gone.name) == true
        })
        let path = f.keys.directory + "/" + zedFile
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        try Data(repeating: 0, count: size).write(to: URL(fileURLWithPath: path))

        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account) == [Self.keysOnly])
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(Self.keysOnly) { try f.data.unprotect(envelope) }
        }
    }

    @Test("keys-only accounts of other tenants keep their keys")
    func otherTenantsKeysStay() async throws {
        let f = try IsolationFixture()
        _ = try f.data.protect(Data("x".utf8), owner: Self.keysOnly)
        let carols = try f.data.protect(Data("carol's".utf8), owner: carol)
        let zed: Identity = "zed@fabrikam.com"
        let zeds = try f.data.protect(Data("zed's".utf8), owner: zed)
        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account) == [Self.keysOnly])
        #expect(try IdentityContext.withThreadIdentity(carol) { try f.data.unprotect(carols) } == Data("carol's".utf8))
        #expect(try IdentityContext.withThreadIdentity(zed) { try f.data.unprotect(zeds) } == Data("zed's".utf8))
    }
}
