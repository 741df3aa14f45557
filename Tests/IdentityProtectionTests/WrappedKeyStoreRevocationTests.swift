import Foundation
import IdentityProtection
@testable import IdentityRuntime
import Testing

/// A key store of the app's own over a `FileKeyStore`: it counts fetches and keeps the keys it handed out in a
/// cache of its own, as a store that saves trips to a slower inner store would.
final class CachingKeyStore: KeyStore {
    let inner: FileKeyStore
    private let cached = LockedValue([Identity: [ProtectionKeyID: ProtectionKey]]())

    init(_ inner: FileKeyStore) {
        self.inner = inner
    }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        let key = try inner.currentKey(for: identity)
        cached.withLock { $0[identity, default: [:]][key.id] = key }
        return key
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if let key = cached.withLock({ $0[identity]?[id] }) { return key }
        return try inner.key(withID: id, for: identity)
    }

    @discardableResult
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.rotateKey(for: identity)
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try inner.destroyKeys(for: identity)
    }
}

@Suite("Keys destroyed in a FileKeyStore stop the handles opened through a key store that wraps it")
struct WrappedKeyStoreRevocationTests {
    struct Setup {
        let fixture: Fixture
        let store: CachingKeyStore
        let files: FileProtectionManager
    }

    static func setUp() throws -> Setup {
        let fixture = try Fixture()
        let store = CachingKeyStore(fixture.keys)
        let files = try FileProtectionManager(
            roots: [fixture.root], keyStore: store, policy: fixture.policy, stateDirectory: fixture.directory + "/wrapped-state")
        return Setup(fixture: fixture, store: store, files: files)
    }

    @Test("destroying the keys in the inner store stops a handle opened through the wrapper (103, no bytes)",
          arguments: [false, true])
    func innerDestructionStopsWrappedHandles(throughWrapper: Bool) throws {
        let setup = try Self.setUp()
        let path = setup.fixture.path("ledger.bin")
        let writer = try IdentityContext.withThreadIdentity(alice) {
            let file = try setup.files.openProtectedFile(atPath: path, options: [.read, .write, .create])
            try file.write(Array("alice's plaintext".utf8))
            return file
        }
        let reader = try IdentityContext.withThreadIdentity(alice) {
            try setup.files.openProtectedFile(atPath: path, options: [.read])
        }
        #expect(writer.isEncrypted)
        #expect(try reader.readToEnd() == Array("alice's plaintext".utf8))

        if throughWrapper {
            try setup.store.destroyKeys(for: alice)
        } else {
            try setup.fixture.keys.destroyKeys(for: alice)
        }
        for handle in [writer, reader] {
            #expect(protectionError { try handle.read(at: 0, upToCount: 100) }?.code == 103)
            #expect(protectionError { try handle.write(Array("x".utf8), at: 0) }?.code == 103)
        }
    }

    @Test("a key the wrapper still caches after its destruction opens no new handle (103)")
    func cachedDestroyedKeyOpensNothing() throws {
        let setup = try Self.setUp()
        let path = setup.fixture.path("ledger.bin")
        try IdentityContext.withThreadIdentity(alice) {
            try setup.files.writeFile(atPath: path, contents: Data("alice's plaintext".utf8))
            #expect(try setup.files.readFile(atPath: path) == Data("alice's plaintext".utf8))
        }
        try setup.fixture.keys.destroyKeys(for: alice)
        let error = protectionError {
            try IdentityContext.withThreadIdentity(alice) {
                try setup.files.openProtectedFile(atPath: path, options: [.read])
            }
        }
        #expect(error?.code == 103)
    }

    @Test("destroying one account's keys leaves another account's handles through the same wrapper alone")
    func otherAccountsUntouched() throws {
        let setup = try Self.setUp()
        let handle = try IdentityContext.withThreadIdentity(bob) {
            let file = try setup.files.openProtectedFile(atPath: setup.fixture.path("bob.bin"), options: [.read, .write, .create])
            try file.write(Array("bob's".utf8))
            return file
        }
        _ = try setup.fixture.keys.currentKey(for: alice)
        try setup.fixture.keys.destroyKeys(for: alice)
        #expect(try handle.read(at: 0, upToCount: 10) == Array("bob's".utf8))
    }

    @Test("a handle opened with one FileKeyStore's key survives the destruction of the same account's keys in another")
    func sameAccountInAnotherStoreUntouched() throws {
        let first = try Fixture()
        let second = try Fixture()
        let handle = try IdentityContext.withThreadIdentity(alice) {
            let file = try second.files.openProtectedFile(atPath: second.path("ledger.bin"), options: [.read, .write, .create])
            try file.write(Array("alice's plaintext".utf8))
            return file
        }
        _ = try first.keys.currentKey(for: alice)
        try first.keys.destroyKeys(for: alice)
        #expect(try handle.read(at: 0, upToCount: 100) == Array("alice's plaintext".utf8))
    }
}
