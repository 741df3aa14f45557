import Foundation
import IdentityProtection
import IdentityRuntime

/// A key store that answers every key id with the same fixed key, so that fuzzed inputs reach the
/// authentication step (and seeds made with it are valid envelopes and files).
public final class FixedKeyStore: KeyStore {
    public static let keyID = ProtectionKeyID(bytes: Array(repeating: 0x4B, count: 16))!
    public static let material = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 3) }

    public init() {}

    public func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try ProtectionKey(id: Self.keyID, material: Self.material)
    }

    public func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try ProtectionKey(id: id, material: Self.material)
    }

    public func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try currentKey(for: identity)
    }

    public func destroyKeys(for identity: Identity) throws(ProtectionError) {}
}

/// The fuzzing fixture: managers over the fixed key store, managing alice and bob with file encryption, in a
/// scratch directory (under /dev/shm when it exists).
public enum FuzzFixture {
    public static let alice: Identity = "alice@contoso.com"
    public static let bob: Identity = "bob@contoso.com"
    /// Isolation off: the fuzzers feed the parsers from no identity, and the parsers, not access, are under test.
    public static let policy = StaticManagedIdentityPolicy(managed: [alice, bob], fileEncryptionRequired: true, dataIsolation: false)
    public static let data = DataProtectionManager(keyStore: FixedKeyStore(), policy: policy)

    public static let directory: String = {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let path = base + "/identity-fuzz-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path + "/root", withIntermediateDirectories: true)
        return path
    }()

    public static func files(chunkSize: Int) -> FileProtectionManager {
        do {
            return try FileProtectionManager(
                roots: [directory + "/root"], keyStore: FixedKeyStore(), policy: policy,
                stateDirectory: directory + "/state", ownerStorage: .indexOnly, chunkSize: chunkSize)
        } catch {
            fatalError("fuzz fixture: \(error)")
        }
    }
}
