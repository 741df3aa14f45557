import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

@Suite("A FileKeyStore lists the identities it holds keys of, from its files")
struct KeyStoreListingTests {
    @Test("every identity with a key file is listed, also one another instance wrote; destroyed ones and temporary files are not")
    func listsTheIdentitiesOfItsKeyFiles() throws {
        let f = try Fixture()
        _ = try f.keys.currentKey(for: alice)
        _ = try f.keys.currentKey(for: bob)
        let other = try FileKeyStore(atPath: f.keys.directory)
        _ = try other.currentKey(for: carol)
        _ = try f.keys.currentKey(for: mallory)
        try f.keys.destroyKeys(for: mallory)
        // What a killed atomic write leaves: not a key file.
        writeRaw(Array("{}".utf8), to: f.keys.directory + "/.0123.key.idp-abcdef.tmp")

        #expect(try f.keys.identitiesWithKeys() == [alice, bob, carol])
    }

    @Test("a key file that does not parse, or that is not named after the identity it holds, is reported, not passed over")
    func unreadableKeyFilesAreReported() throws {
        let f = try Fixture()
        _ = try f.keys.currentKey(for: alice)
        let malformed = f.keys.directory + "/" + String(repeating: "a", count: 64) + ".key"
        writeRaw(Array("not json".utf8), to: malformed)
        #expect(throws: ProtectionError.ioFailure(path: malformed, operation: "read key file (malformed)", errno: EIO)) {
            try f.keys.identitiesWithKeys()
        }
        try FileManager.default.removeItem(atPath: malformed)

        // Alice's ring under another name: destroying alice's keys would not reach it.
        let aliceFile = try #require(try FileManager.default.contentsOfDirectory(atPath: f.keys.directory).first { $0.hasSuffix(".key") })
        let misnamed = f.keys.directory + "/" + String(repeating: "b", count: 64) + ".key"
        try FileManager.default.copyItem(atPath: f.keys.directory + "/" + aliceFile, toPath: misnamed)
        #expect(throws: ProtectionError.ioFailure(path: misnamed, operation: "read key file (malformed)", errno: EIO)) {
            try f.keys.identitiesWithKeys()
        }
    }

    @Test("a store that cannot list says so with nil")
    func storesThatCannotListAnswerNil() throws {
        struct Opaque: KeyStore {
            let inner: FileKeyStore
            func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.currentKey(for: identity) }
            func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
                try inner.key(withID: id, for: identity)
            }
            func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.rotateKey(for: identity) }
            func destroyKeys(for identity: Identity) throws(ProtectionError) { try inner.destroyKeys(for: identity) }
        }
        let f = try Fixture()
        _ = try f.keys.currentKey(for: alice)
        #expect(try Opaque(inner: f.keys).identitiesWithKeys() == nil)
    }
}
