import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("New data is never sealed with a destroyed key that a wrapping key store still caches")
struct CachedDestroyedKeyTests {
    struct Setup {
        let fixture: Fixture
        let store: CurrentKeyCachingStore
        let files: FileProtectionManager
        let data: DataProtectionManager
    }

    /// A manager over a store that caches alice's current key, which alice has used once (so it is cached),
    /// and whose keys are then destroyed in the inner `FileKeyStore` (or by a wipe through the manager).
    static func setUp(wipe: Bool) throws -> Setup {
        let fixture = try Fixture()
        let store = CurrentKeyCachingStore(fixture.keys)
        let files = try DestroyedKeyReachTests.manager(fixture, store)
        let data = DataProtectionManager(keyStore: store, policy: fixture.policy)
        try IdentityContext.withThreadIdentity(alice) {
            try files.writeFile(atPath: fixture.path("first.txt"), contents: Data("first".utf8))
        }
        if wipe {
            _ = try files.removeFiles(ownedBy: alice)
        } else {
            try fixture.keys.destroyKeys(for: alice)
        }
        return Setup(fixture: fixture, store: store, files: files, data: data)
    }

    @Test("encryptFile with a cached destroyed key is refused (103) and leaves the file as it was",
          arguments: [false, true])
    func encryptFileRefused(wipe: Bool) throws {
        let setup = try Self.setUp(wipe: wipe)
        let path = setup.fixture.path("plain.txt")
        writeRaw(Array("alice's plaintext".utf8), to: path)
        #expect(protectionError { try setup.files.encryptFile(atPath: path, owner: alice) }?.code == 103)
        #expect(bytes(of: path) == Array("alice's plaintext".utf8))
    }

    @Test("protect(atPath:owner:) with a cached destroyed key is refused (103) and leaves the file as it was",
          arguments: [false, true])
    func protectFileRefused(wipe: Bool) throws {
        let setup = try Self.setUp(wipe: wipe)
        let path = setup.fixture.path("plain.txt")
        writeRaw(Array("alice's plaintext".utf8), to: path)
        #expect(protectionError { try setup.files.protect(atPath: path, owner: alice) }?.code == 103)
        #expect(bytes(of: path) == Array("alice's plaintext".utf8))
    }

    @Test("writeFile with a cached destroyed key is refused (103): no new file, an existing one untouched",
          arguments: [false, true])
    func writeFileRefused(wipe: Bool) throws {
        let setup = try Self.setUp(wipe: wipe)
        let fresh = setup.fixture.path("new.txt")
        let existing = setup.fixture.path("existing.txt")
        writeRaw(Array("as it was".utf8), to: existing)
        IdentityContext.withThreadIdentity(alice) {
            #expect(protectionError { try setup.files.writeFile(atPath: fresh, contents: Data("new".utf8)) }?.code == 103)
            #expect(protectionError { try setup.files.writeFile(atPath: existing, contents: Data("new".utf8)) }?.code == 103)
        }
        #expect(!FileManager.default.fileExists(atPath: fresh))
        #expect(bytes(of: existing) == Array("as it was".utf8))
    }

    @Test("protecting data or a stream with a cached destroyed key is refused (103)", arguments: [false, true])
    func dataAndStreamRefused(wipe: Bool) throws {
        let setup = try Self.setUp(wipe: wipe)
        #expect(protectionError { try setup.data.protect(Data("secret".utf8), owner: alice) }?.code == 103)
        #expect(protectionError { try setup.data.protect([[UInt8]("secret".utf8)].async, owner: alice) }?.code == 103)
        let source = setup.fixture.path("source.txt")
        let destination = setup.fixture.path("sealed.idps")
        writeRaw(Array("source".utf8), to: source)
        #expect(protectionError {
            try setup.files.protect(atPath: source, toPath: destination, owner: alice)
        }?.code == 103)
        #expect(!FileManager.default.fileExists(atPath: destination))
    }
}
