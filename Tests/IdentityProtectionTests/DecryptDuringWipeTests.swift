import Foundation
import IdentityProtection
@testable import IdentityRuntime
import Testing

/// A key store over a `FileKeyStore` that, the first time a key is looked up by its id, wipes alice through
/// the manager after it fetched the key and before it returns it: the wipe lands between a decryption's key
/// fetch and its write, on the same thread. It keeps the keys it fetched by id, as a caching wrapper would,
/// so a second lookup after the wipe still answers.
final class WipeOnKeyLookupStore: KeyStore {
    let inner: FileKeyStore
    let manager = LockedValue<FileProtectionManager?>(nil)
    private let armed = LockedValue(false)
    private let cached = LockedValue([ProtectionKeyID: ProtectionKey]())

    init(_ inner: FileKeyStore) {
        self.inner = inner
    }

    func arm() { armed.withLock { $0 = true } }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.currentKey(for: identity) }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if let key = cached.withLock({ $0[id] }) { return key }
        let key = try inner.key(withID: id, for: identity)
        cached.withLock { $0[id] = key }
        let fire = armed.withLock { armed in defer { armed = false }; return armed }
        if fire, let manager = manager.withLock({ $0 }) {
            _ = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try manager.removeFiles(ownedBy: alice) }
        }
        return key
    }

    @discardableResult
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) { try inner.destroyKeys(for: identity) }
}

@Suite("A decryption that races a wipe of its owner leaves no plaintext behind")
struct DecryptDuringWipeTests {
    struct Setup {
        let fixture: Fixture
        let store: WipeOnKeyLookupStore
        let files: FileProtectionManager
        let encrypted: String
    }

    static func setUp(ownerStorage: OwnerStorage = .automatic) throws -> Setup {
        let fixture = try Fixture(ownerStorage: ownerStorage)
        let store = WipeOnKeyLookupStore(fixture.keys)
        let files = try FileProtectionManager(
            roots: [fixture.root], keyStore: store, policy: fixture.policy, stateDirectory: fixture.directory + "/wipe-state",
            ownerStorage: ownerStorage)
        store.manager.withLock { $0 = files }
        let encrypted = fixture.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) {
            try files.writeFile(atPath: encrypted, contents: Data("alice's plaintext".utf8))
        }
        #expect(try files.isFileEncrypted(atPath: encrypted))
        store.arm()
        return Setup(fixture: fixture, store: store, files: files, encrypted: encrypted)
    }

    @Test("decryptFile(atPath:toPath:) with a wipe after its key fetch is refused (103) and writes no copy")
    func copyRefused() throws {
        let setup = try Self.setUp()
        let copy = setup.fixture.path("copy.txt")
        let error = IdentityContext.withThreadIdentity(alice) {
            protectionError { try setup.files.decryptFile(atPath: setup.encrypted, toPath: copy) }
        }
        #expect(error?.code == 103)
        #expect(!FileManager.default.fileExists(atPath: copy))
        #expect(!FileManager.default.fileExists(atPath: setup.encrypted))
    }

    @Test("decryptFile(atPath:) with a wipe after its key fetch is refused (103) and puts no plaintext back")
    func inPlaceRefused() throws {
        let setup = try Self.setUp()
        let error = IdentityContext.withThreadIdentity(alice) {
            protectionError { try setup.files.decryptFile(atPath: setup.encrypted) }
        }
        #expect(error?.code == 103)
        #expect(!FileManager.default.fileExists(atPath: setup.encrypted))
    }

    @Test("a decryption that begins while a wipe of its owner walks the roots is refused (103) and writes no copy")
    func decryptionDuringWalkRefused() throws {
        let fixture = try Fixture()
        let files = fixture.files
        let outside = fixture.directory + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let source = outside + "/alice.txt"
        let copy = fixture.path("copy.txt")
        try IdentityContext.withThreadIdentity(alice) {
            try files.writeFile(atPath: fixture.path("alice.txt"), contents: Data("wiped".utf8))
            try files.writeFile(atPath: source, contents: Data("alice's plaintext".utf8))
        }
        let outcome = LockedValue<ProtectionError??>(nil)
        files.storage.injectFaults { operation, _ in
            guard operation == "unlink", outcome.withLock({ $0 == nil }) else { return nil }
            let error = IdentityContext.withThreadIdentity(alice) { () -> ProtectionError? in
                do throws(ProtectionError) {
                    try files.decryptFile(atPath: source, toPath: copy)
                    return nil
                } catch {
                    return error
                }
            }
            outcome.withLock { $0 = .some(error) }
            return nil
        }
        _ = try IdentityContext.withThreadIdentity(alice) { try files.removeFiles(ownedBy: alice) }
        files.storage.injectFaults(nil)
        #expect(outcome.withLock { $0 }??.code == 103)
        #expect(!FileManager.default.fileExists(atPath: copy))
    }
}
