import Foundation
import IdentityProtection
@testable import IdentityRuntime
import Testing

/// A key store of the app's own that keeps each account's keys under a tenant's name in the inner store, as a
/// service that shares one key directory between tenants would.
final class TenantNamespacedKeyStore: KeyStore {
    let inner: FileKeyStore
    let tenant: String

    init(_ inner: FileKeyStore, tenant: String) {
        self.inner = inner
        self.tenant = tenant
    }

    func inInner(_ identity: Identity) -> Identity { Identity(tenant + "/" + identity.name) }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.currentKey(for: inInner(identity))
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.key(withID: id, for: inInner(identity))
    }

    @discardableResult
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.rotateKey(for: inInner(identity))
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try inner.destroyKeys(for: inInner(identity))
    }
}

/// A key store of the app's own that remembers each account's current key, as a store that saves a trip to a
/// slower inner store on every new file would.
final class CurrentKeyCachingStore: KeyStore {
    let inner: FileKeyStore
    private let current = LockedValue([Identity: ProtectionKey]())

    init(_ inner: FileKeyStore) {
        self.inner = inner
    }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if let key = current.withLock({ $0[identity] }) { return key }
        let key = try inner.currentKey(for: identity)
        current.withLock { $0[identity] = key }
        return key
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.key(withID: id, for: identity)
    }

    @discardableResult
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.rotateKey(for: identity)
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try inner.destroyKeys(for: identity)
    }
}

@Suite("A key destroyed in a FileKeyStore stops every handle opened with it, whatever store passed it on")
struct DestroyedKeyReachTests {
    static func manager(_ fixture: Fixture, _ store: some KeyStore) throws -> FileProtectionManager {
        try FileProtectionManager(
            roots: [fixture.root], keyStore: store, policy: fixture.policy, stateDirectory: fixture.directory + "/wrapped-state")
    }

    static func openWritten(_ files: FileProtectionManager, _ path: String) throws -> ProtectedFile {
        try IdentityContext.withThreadIdentity(alice) {
            let file = try files.openProtectedFile(atPath: path, options: [.read, .write, .create])
            try file.write(Array("alice's plaintext".utf8))
            return file
        }
    }

    @Test("a handle opened through a store that keeps the account's keys under another name stops (103)")
    func renamedAccountStops() throws {
        let fixture = try Fixture()
        let store = TenantNamespacedKeyStore(fixture.keys, tenant: "contoso")
        let handle = try Self.openWritten(try Self.manager(fixture, store), fixture.path("ledger.bin"))
        #expect(handle.isEncrypted)

        try fixture.keys.destroyKeys(for: store.inInner(alice))
        #expect(protectionError { try handle.read(at: 0, upToCount: 100) }?.code == 103)
        #expect(protectionError { try handle.write(Array("x".utf8), at: 0) }?.code == 103)
    }

    @Test("a handle opened with a key made by rotateKey stops when the keys are destroyed (103)")
    func rotatedKeyStops() throws {
        let fixture = try Fixture()
        let store = CachingKeyStore(fixture.keys)
        let files = try Self.manager(fixture, store)
        _ = try fixture.keys.currentKey(for: alice)
        let rotated = try store.rotateKey(for: alice)
        let handle = try Self.openWritten(files, fixture.path("ledger.bin"))
        #expect(try store.currentKey(for: alice) == rotated)

        try fixture.keys.destroyKeys(for: alice)
        #expect(protectionError { try handle.read(at: 0, upToCount: 100) }?.code == 103)
    }

    @Test("creating a file with a destroyed key that a wrapper still caches is refused and leaves no file")
    func createWithCachedDestroyedKeyLeavesNoFile() throws {
        let fixture = try Fixture()
        let files = try Self.manager(fixture, CurrentKeyCachingStore(fixture.keys))
        _ = try Self.openWritten(files, fixture.path("first.bin"))
        try fixture.keys.destroyKeys(for: alice)

        let path = fixture.path("second.bin")
        let error = protectionError { try Self.openWritten(files, path) }
        #expect(error?.code == 103)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("a plain file that must be encrypted is left as it was when a wrapper still caches a destroyed key (103)")
    func encryptionWithCachedDestroyedKeyLeavesFile() throws {
        let fixture = try Fixture()
        let files = try Self.manager(fixture, CurrentKeyCachingStore(fixture.keys))
        _ = try Self.openWritten(files, fixture.path("first.bin"))
        let path = fixture.path("plain.txt")
        writeRaw(Array("alice's plaintext".utf8), to: path)
        fixture.policy.fileEncryptionRequired = false
        try files.protect(atPath: path, owner: alice)
        fixture.policy.fileEncryptionRequired = true
        try fixture.keys.destroyKeys(for: alice)

        let error = protectionError {
            try IdentityContext.withThreadIdentity(alice) { try files.openProtectedFile(atPath: path, options: [.read, .write]) }
        }
        #expect(error?.code == 103)
        #expect(bytes(of: path) == Array("alice's plaintext".utf8))
    }

    @Test("an open racing the destruction through a caching wrapper never keeps a working handle",
          arguments: [1, 2, 4, 8])
    func racingOpensNeverSurvive(threads: Int) throws {
        let rounds = longTests ? 50 : 8
        for _ in 0..<rounds {
            let fixture = try Fixture()
            let store = CachingKeyStore(fixture.keys)
            let files = try Self.manager(fixture, store)
            let path = fixture.path("ledger.bin")
            _ = try Self.openWritten(files, path)
            let handles = LockedValue([ProtectedFile]())
            DispatchQueue.concurrentPerform(iterations: threads + 1) { index in
                if index == 0 {
                    try? fixture.keys.destroyKeys(for: alice)
                    return
                }
                for _ in 0..<20 {
                    let handle = try? IdentityContext.withThreadIdentity(alice) {
                        try files.openProtectedFile(atPath: path, options: [.read])
                    }
                    if let handle { handles.withLock { $0.append(handle) } }
                }
            }
            for handle in handles.withLock({ $0 }) {
                #expect(protectionError { try handle.read(at: 0, upToCount: 100) }?.code == 103)
            }
        }
    }
}
