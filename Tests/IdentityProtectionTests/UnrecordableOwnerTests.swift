import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

private let odd = Identity("a\u{1}b@contoso.com")

/// The key files in the store's directory.
private func keyFiles(_ f: Fixture) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: f.keys.directory)) ?? []).filter { $0.hasSuffix(".key") }.sorted()
}

private func rootEntries(_ f: Fixture) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: f.root)) ?? []).sorted()
}

/// A fixture whose policy manages `odd` too (encryption as asked), with its own file manager.
private func oddManagers(_ f: Fixture, encryption: Bool) throws -> (FileProtectionManager, DataProtectionManager) {
    let policy = StaticManagedIdentityPolicy(managed: [odd, alice, bob], fileEncryptionRequired: encryption, dataIsolation: false)
    let files = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state-odd")
    return (files, DataProtectionManager(keyStore: f.keys, policy: policy))
}

@Suite("An owner no reader would read back is refused before anything is made for it, a key included", .serialized)
struct UnrecordableOwnerTests {
    @Test("streamed protect(atPath:toPath:) for an owner with a control character: 104, no destination, no key made")
    func fileStreamOddOwner() throws {
        let f = try Fixture()
        let (files, _) = try oddManagers(f, encryption: true)
        let source = f.path("in.txt")
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: source, contents: Data("secret".utf8)) }
        let keysBefore = keyFiles(f)
        #expect(protectionError { try IdentityContext.withThreadIdentity(alice) { try files.protect(atPath: source, toPath: f.path("out.idps"), owner: odd) } }?.code == 104)
        #expect(rootEntries(f) == ["in.txt"])
        #expect(keyFiles(f) == keysBefore, "a key file was written for an owner the call refused")
        #expect(try f.keys.identitiesWithKeys()?.identities.contains(odd) == false)
    }

    @Test("streamed DataProtectionManager.protect(_:owner:) for an owner with a control character: 104 at the call, no key made")
    func dataStreamOddOwner() throws {
        let f = try Fixture()
        let (_, data) = try oddManagers(f, encryption: true)
        let keysBefore = keyFiles(f)
        #expect(protectionError { try data.protect([[UInt8](repeating: 1, count: 10)].async, owner: odd) }?.code == 104)
        #expect(keyFiles(f) == keysBefore, "a key file was written for an owner the call refused")
    }

    @Test("DataProtectionManager.protect(Data) for an owner with a control character: 104, no key made")
    func envelopeOddOwner() throws {
        let f = try Fixture()
        let (_, data) = try oddManagers(f, encryption: true)
        let keysBefore = keyFiles(f)
        #expect(protectionError { try data.protect(Data("x".utf8), owner: odd) }?.code == 104)
        #expect(keyFiles(f) == keysBefore, "a key file was written for an owner the call refused")
    }

    @Test("in-place protect(atPath:owner:) of alice's file to an owner with a control character (encryption required): 104, file untouched, no key made")
    func inPlaceEncryptingTransfer() throws {
        let f = try Fixture()
        let (files, _) = try oddManagers(f, encryption: true)
        let path = f.path("a.txt")
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: path, contents: Data("alice".utf8)) }
        let before = bytes(of: path)
        let keysBefore = keyFiles(f)
        #expect(protectionError { try IdentityContext.withThreadIdentity(alice) { try files.protect(atPath: path, owner: odd) } }?.code == 104)
        #expect(bytes(of: path) == before)
        #expect(try files.protectionInfo(atPath: path)?.owner == alice)
        #expect(rootEntries(f) == ["a.txt"])
        #expect(keyFiles(f) == keysBefore, "a key file was written for an owner the call refused")
    }

    @Test("encryptFile(atPath:owner:) to an owner with a control character: 104, file untouched, no key made")
    func encryptFileOddOwner() throws {
        let f = try Fixture()
        let (files, _) = try oddManagers(f, encryption: false)
        let path = f.path("a.txt")
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: path, contents: Data("alice".utf8)) }
        let before = bytes(of: path)
        let keysBefore = keyFiles(f)
        #expect(protectionError { try IdentityContext.withThreadIdentity(alice) { try files.encryptFile(atPath: path, owner: odd) } }?.code == 104)
        #expect(bytes(of: path) == before)
        #expect(rootEntries(f) == ["a.txt"])
        #expect(keyFiles(f) == keysBefore, "a key file was written for an owner the call refused")
    }

    @Test("in-place protect(atPath:owner:) in the clear, of an encrypted file of alice, to an owner with a control character: 104, nothing decrypted or left")
    func inPlaceClearTransferOfEncrypted() throws {
        let f = try Fixture()
        let (files, _) = try oddManagers(f, encryption: false)
        let path = f.path("a.txt")
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: path, contents: Data("alice".utf8)) }
        try IdentityContext.withThreadIdentity(alice) { try files.encryptFile(atPath: path, owner: alice) }
        let before = bytes(of: path)
        #expect(protectionError { try IdentityContext.withThreadIdentity(alice) { try files.protect(atPath: path, owner: odd) } }?.code == 104)
        #expect(bytes(of: path) == before)
        #expect(rootEntries(f) == ["a.txt"])
        #expect(try files.protectionInfo(atPath: path)?.owner == alice)
    }

    @Test("a write as an owner with a control character, over alice's file or to a new one, is refused and leaves alice's file")
    func writeOverAsOddOwner() throws {
        let f = try Fixture()
        let (files, _) = try oddManagers(f, encryption: false)
        let path = f.path("a.txt")
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: path, contents: Data("alice".utf8)) }
        let before = bytes(of: path)
        #expect(protectionError { try IdentityContext.withThreadIdentity(odd) { try files.writeFile(atPath: path, contents: Data("odd".utf8)) } }?.code == 104)
        #expect(protectionError { try IdentityContext.withThreadIdentity(odd) { try files.openFile(atPath: f.path("new.txt"), options: [.write, .create]) } }?.code == 104)
        #expect(bytes(of: path) == before)
        #expect(rootEntries(f) == ["a.txt"])
    }

    @Test("a key leaked for an owner with a control character is listed, and a wipe of it completes and leaves no journal entry")
    func leakedOddKeyIsWipeable() throws {
        let f = try Fixture()
        let (files, data) = try oddManagers(f, encryption: true)
        _ = try? data.protect(Data("x".utf8), owner: odd)
        let listed = try f.keys.identitiesWithKeys()
        if listed?.identities.contains(odd) == true {
            _ = try files.storage.removeFilesAsPolicy(ownedByAnyOf: [odd])
            #expect(try f.keys.identitiesWithKeys()?.identities.contains(odd) == false)
            #expect(try files.storage.journal.pending().isEmpty)
        }
        #expect(listed?.unreadable.isEmpty == true)
    }
}

/// A FileKeyStore whose destroyKeys blocks until `gate` is signalled (for `blocked`).
private final class DestroyGatedKeyStore: KeyStore, @unchecked Sendable {
    let base: FileKeyStore
    let blocked: Identity
    let entered = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)
    init(_ base: FileKeyStore, blocking: Identity) { self.base = base; self.blocked = blocking }
    var keyDirectories: [String] { base.keyDirectories }
    func identitiesWithKeys() throws(ProtectionError) -> KeyListing? { try base.identitiesWithKeys() }
    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try base.currentKey(for: identity) }
    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey { try base.key(withID: id, for: identity) }
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try base.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        if identity == blocked { entered.signal(); gate.wait() }
        try base.destroyKeys(for: identity)
    }
}

@Suite("Two managers on one state directory wiping one account at once", .serialized)
struct OverlappingWipesTests {
    @Test("a wipe of alice by a manager with a second root, while another manager's wipe of alice (same store, same state) runs: both settle, nothing left, no entry, no lock file", .timeLimit(.minutes(10)))
    func overlappingWipesSharedStore() throws {
        let f = try Fixture()
        let second = f.directory + "/root2"
        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: true)
        let gated = DestroyGatedKeyStore(f.keys, blocking: alice)
        let one = try FileProtectionManager(roots: [f.root], keyStore: gated, policy: f.policy, stateDirectory: f.directory + "/shared")
        let two = try FileProtectionManager(roots: [f.root, second], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/shared")
        try IdentityContext.withThreadIdentity(alice) {
            try one.writeFile(atPath: f.path("a1.txt"), contents: Data("1".utf8))
            try two.writeFile(atPath: second + "/a2.txt", contents: Data("2".utf8))
        }
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? one.storage.removeFilesAsPolicy(ownedByAnyOf: [alice])
            done.signal()
        }.start()
        #expect(gated.entered.wait(timeout: .now() + 10) == .success)
        // A start meanwhile leaves the running wipe alone.
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/shared")
        #expect(try one.storage.journal.pending().count == 1)
        let removed = try two.storage.removeFilesAsPolicy(ownedByAnyOf: [alice])
        #expect(removed[alice] == [second + "/a2.txt"].map { POSIX.realPath(Paths.parent($0))! + "/a2.txt" })
        #expect(try one.storage.journal.pending().count == 1, "the running wipe's entry stays")
        gated.gate.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(try one.storage.journal.pending().isEmpty)
        let state = one.storage.stateDirectory
        let locks = ((try? FileManager.default.contentsOfDirectory(atPath: state)) ?? []).filter { $0.hasPrefix("wipe-") }
        #expect(locks.isEmpty)
        #expect(try two.storage.ownersUnderRoots().isEmpty)
    }
}
