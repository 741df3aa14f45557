import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("The key directory is never read or written through the file APIs, whatever store wraps it")
struct KeyDirectoryReservationTests {
    /// The key ring file alice's key lives in, made by a write through `files`.
    static func aliceKeyFile(_ fixture: Fixture, _ files: FileProtectionManager) throws -> String {
        try IdentityContext.withThreadIdentity(alice) {
            try files.writeFile(atPath: fixture.path("alice.txt"), contents: Data("alice's plaintext".utf8))
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: fixture.keys.directory).filter { $0.hasSuffix(".key") }
        #expect(names.count == 1)
        return fixture.keys.directory + "/" + (names.first ?? "missing.key")
    }

    @Test("a key file under a store that wraps the FileKeyStore is neither read nor replaced (116)")
    func wrappedKeyFileRefused() throws {
        let setup = try WrappedKeyStoreRevocationTests.setUp()
        let keyFile = try Self.aliceKeyFile(setup.fixture, setup.files)
        let before = bytes(of: keyFile)
        let link = setup.fixture.path("keys-link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: setup.fixture.keys.directory)
        let linked = link + "/" + (keyFile as NSString).lastPathComponent
        IdentityContext.withThreadIdentity(nil) {
            for path in [keyFile, linked] {
                #expect(protectionError { try setup.files.readFile(atPath: path) }?.code == 116)
                #expect(protectionError { try setup.files.writeFile(atPath: path, contents: Data("{}".utf8)) }?.code == 116)
                #expect(protectionError { try setup.files.openFile(atPath: path, options: [.read]) }?.code == 116)
                #expect(protectionError { try setup.files.openProtectedFile(atPath: path, options: [.read]) }?.code == 116)
            }
            #expect(protectionError {
                try setup.files.writeFile(atPath: setup.fixture.keys.directory + "/new.key", contents: Data("{}".utf8))
            }?.code == 116)
        }
        #expect(bytes(of: keyFile) == before)
        #expect(!FileManager.default.fileExists(atPath: setup.fixture.keys.directory + "/new.key"))
    }
}

/// A key store of the app's own that keeps its keys in files of a directory of its own (here: through an inner
/// `FileKeyStore` it reaches under another name, so only its declaration names the directory to the manager).
final class DeclaredDirectoryKeyStore: KeyStore {
    let inner: CachingKeyStore
    let directory: String

    init(_ inner: CachingKeyStore, directory: String) {
        self.inner = inner
        self.directory = directory
    }

    var keyDirectories: [String] { [directory] }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.currentKey(for: identity) }
    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.key(withID: id, for: identity)
    }
    @discardableResult
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) { try inner.destroyKeys(for: identity) }
}

extension KeyDirectoryReservationTests {
    @Test("a directory a key store declares in keyDirectories is neither read nor written (116), links resolved")
    func declaredDirectoryRefused() throws {
        let fixture = try Fixture()
        let secrets = fixture.directory + "/app-keys"
        try FileManager.default.createDirectory(atPath: secrets, withIntermediateDirectories: true)
        writeRaw(Array("wrapped key material".utf8), to: secrets + "/ring.bin")
        let declaredThroughLink = fixture.directory + "/app-keys-link"
        try FileManager.default.createSymbolicLink(atPath: declaredThroughLink, withDestinationPath: secrets)
        let store = DeclaredDirectoryKeyStore(CachingKeyStore(fixture.keys), directory: declaredThroughLink)
        let files = try FileProtectionManager(
            roots: [fixture.root], keyStore: store, policy: fixture.policy, stateDirectory: fixture.directory + "/declared-state")
        IdentityContext.withThreadIdentity(nil) {
            #expect(protectionError { try files.readFile(atPath: secrets + "/ring.bin") }?.code == 116)
            #expect(protectionError { try files.writeFile(atPath: secrets + "/ring.bin", contents: Data("{}".utf8)) }?.code == 116)
        }
        #expect(bytes(of: secrets + "/ring.bin") == Array("wrapped key material".utf8))
        // Another manager, whose store declares nothing, may use the directory as any other.
        #expect(try fixture.files.readFile(atPath: secrets + "/ring.bin") == Data("wrapped key material".utf8))
    }
}
