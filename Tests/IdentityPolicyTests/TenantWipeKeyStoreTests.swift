import Dispatch
import Foundation
@testable import IdentityPolicy
@testable import IdentityProtection
import IdentityRuntime
import Testing

private let keysOnly: Identity = "yan@contoso.com"

/// A key store over a FileKeyStore that fails what it is told to fail.
private final class FaultyKeyStore: KeyStore, @unchecked Sendable {
    let base: FileKeyStore
    let failDestroy: Set<Identity>
    let failListing: Bool
    let directories: Bool
    let gate: (Identity, DispatchSemaphore, DispatchSemaphore)?
    init(_ base: FileKeyStore, failDestroy: Set<Identity> = [], failListing: Bool = false, directories: Bool = true,
         gate: (Identity, DispatchSemaphore, DispatchSemaphore)? = nil) {
        self.base = base; self.failDestroy = failDestroy; self.failListing = failListing; self.directories = directories; self.gate = gate
    }
    var keyDirectories: [String] { directories ? base.keyDirectories : [] }
    func identitiesWithKeys() throws(ProtectionError) -> KeyListing? {
        if failListing { throw .keyStoreUnavailable(reason: "listing down") }
        return try base.identitiesWithKeys()
    }
    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try base.currentKey(for: identity) }
    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey { try base.key(withID: id, for: identity) }
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try base.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        if let (who, entered, release) = gate, who == identity { entered.signal(); release.wait() }
        if failDestroy.contains(identity) { throw .keyStoreUnavailable(reason: "destroy down") }
        try base.destroyKeys(for: identity)
    }
}

private func policySource() -> StaticPolicySource {
    StaticPolicySource([:], tenants: ["contoso.com": ownedPolicy("contoso"), "fabrikam.com": ownedPolicy("fabrikam", encrypt: false)])
}

@Suite("A tenant's wipe across key stores: failing destroys, the manager's own store, stores that cannot list, other managers' wipes", .exclusiveProcessIdentity, .serialized)
struct TenantWipeKeyStoreTests {
    @Test("a listed keys-only account whose destroyKeys fails: the report is incomplete for it, the wipe settles, its entry stays")
    func keysOnlyDestroyFails() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let manager = PolicyManager(policySource: policySource())
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        let store = FaultyKeyStore(keys, failDestroy: [keysOnly])
        let files = try FileProtectionManager(roots: [root], keyStore: store, policy: manager, stateDirectory: directory.file("state"))
        manager.fileProtection = files
        let data = DataProtectionManager(keyStore: keys, policy: manager)
        let envelope = try data.protect(Data("only keys".utf8), owner: keysOnly)

        let report = await manager.wipeData(forTenant: "contoso.com")
        #expect(!report.isComplete)
        #expect(report.accounts.map(\.account) == [keysOnly])
        #expect(report.accounts.first?.error == .keyStoreUnavailable(reason: "destroy down"))
        #expect(!report.leftovers.contains { $0.path.isEmpty }, "the search did not settle")
        #expect(try files.storage.journal.pending().map(\.accounts) == [[keysOnly.name]])
        // Its keys stay (the report says so); the account itself stays blocked (.wiped).
        #expect(try keys.identitiesWithKeys()?.identities.contains(keysOnly) == true)
        #expect(manager.blockReason(for: keysOnly) == .wiped)
        _ = envelope
        // While the store keeps failing, every start on that state directory throws (documented).
        #expect(throws: ProtectionError.self) {
            _ = try FileProtectionManager(roots: [root], keyStore: store, policy: manager, stateDirectory: directory.file("state"))
        }
        // The tenant's block ended.
        #expect(manager.blockReason(for: "new@contoso.com") == .notBlocked)
    }

    @Test("the manager's own keyStore, with no file manager or beside one with another store: a tenant's keys-only account there is found and its keys destroyed", arguments: [false, true])
    func managerKeyStore(besideFileManager: Bool) async throws {
        let directory = try TemporaryDirectory()
        let manager = PolicyManager(policySource: policySource())
        let dataKeys = try FileKeyStore(atPath: directory.file("data-keys"))
        if besideFileManager {
            let root = directory.file("root")
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let fileKeys = try FileKeyStore(atPath: directory.file("file-keys"))
            manager.fileProtection = try FileProtectionManager(roots: [root], keyStore: fileKeys, policy: manager, stateDirectory: directory.file("state"))
        }
        manager.keyStore = dataKeys
        let data = DataProtectionManager(keyStore: dataKeys, policy: manager)
        let envelope = try data.protect(Data("only keys".utf8), owner: keysOnly)
        let report = await manager.wipeData(forTenant: "contoso.com")
        let keysGone = (try? IdentityContext.withThreadIdentity(keysOnly) { try data.unprotect(envelope) }) == nil
        #expect(keysGone, "\(keysOnly)'s keys in manager.keyStore survive")
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account) == [keysOnly])
    }

    @Test("a store that cannot list at all and has no key directory: the leftover names the key store, not the empty path of a search that did not settle")
    func listingFailureWithoutDirectory() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let manager = PolicyManager(policySource: policySource())
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        let store = FaultyKeyStore(keys, failListing: true, directories: false)
        manager.fileProtection = try FileProtectionManager(roots: [root], keyStore: store, policy: manager, stateDirectory: directory.file("state"))
        let report = await manager.wipeData(forTenant: "contoso.com")
        #expect(!report.isComplete)
        #expect(report.leftovers.count == 1)
        #expect(report.leftovers.first?.path == "<key store>")
        #expect(report.leftovers.first?.error == .keyStoreUnavailable(reason: "listing down"))
    }

    @Test("a tenant wipe while another manager on the same state directory runs a wipe of one of its accounts: no deadlock, both settle, journal empty", .timeLimit(.minutes(10)))
    func tenantWipeBesideRunningWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        _ = try f.write("bob.txt", as: bob, "bob")
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let gated = FaultyKeyStore(f.keys, gate: (alice, entered, release))
        let other = try FileProtectionManager(roots: [f.root], keyStore: gated, policy: f.manager, stateDirectory: f.directory.file("state"))
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? other.storage.removeFilesAsPolicy(ownedByAnyOf: [alice])
            done.signal()
        }.start()
        #expect(entered.wait(timeout: .now() + 10) == .success)
        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(report.isComplete)
        #expect(Set(report.accounts.map(\.account)) == [alice, bob])
        #expect(try f.files.storage.journal.pending().count == 1, "the other manager's running wipe keeps its entry")
        release.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(try f.files.storage.journal.pending().isEmpty)
        let state = f.files.storage.stateDirectory
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: state)) ?? []).filter { $0.hasPrefix("wipe-") }.isEmpty)
    }

    @Test("a FileKeyStore shared by two file managers (other roots, other state): a tenant wipe through one destroys the keys the other's encrypted files need, and reports complete")
    func sharedStoreTwoManagers() async throws {
        let f = try IsolationFixture()
        let otherRoot = f.directory.file("other-root")
        try FileManager.default.createDirectory(atPath: otherRoot, withIntermediateDirectories: true)
        let other = try FileProtectionManager(roots: [otherRoot], keyStore: f.keys, policy: f.manager, stateDirectory: f.directory.file("state-other"))
        let path = otherRoot + "/yan.txt"
        try IdentityContext.withThreadIdentity(keysOnly) { try other.writeFile(atPath: path, contents: Data("yan".utf8)) }
        #expect(try other.isFileEncrypted(atPath: path))
        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(report.accounts.map(\.account) == [keysOnly])
        #expect(report.isComplete)
        // The file outside the wiping manager's roots stays, unreadable.
        #expect(FileManager.default.fileExists(atPath: path))
        #expect((try? IdentityContext.withThreadIdentity(keysOnly) { try other.readFile(atPath: path) }) == nil)
    }
}
