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

        #expect(try f.keys.identitiesWithKeys() == KeyListing(identities: [alice, bob, carol]))
    }

    @Test("a key file that does not parse, or that is not named after the identity it holds, is listed as unreadable; the others are listed")
    func unreadableKeyFilesAreReported() throws {
        let f = try Fixture()
        _ = try f.keys.currentKey(for: alice)
        let aliceFile = try #require(try FileManager.default.contentsOfDirectory(atPath: f.keys.directory).first { $0.hasSuffix(".key") })
        _ = try f.keys.currentKey(for: bob)
        let malformed = f.keys.directory + "/" + String(repeating: "a", count: 64) + ".key"
        writeRaw(Array("not json".utf8), to: malformed)
        // Alice's ring under another name: destroying alice's keys would not reach it.
        let misnamed = f.keys.directory + "/" + String(repeating: "b", count: 64) + ".key"
        try FileManager.default.copyItem(atPath: f.keys.directory + "/" + aliceFile, toPath: misnamed)

        let listing = try #require(try f.keys.identitiesWithKeys())
        #expect(listing.identities == [alice, bob])
        let corrupt = { (path: String) in ProtectionError.ioFailure(path: path, operation: "read key file (malformed)", errno: EIO) }
        #expect(listing.unreadable.sorted { $0.path < $1.path } == [
            WipeLeftover(path: malformed, owner: nil, error: corrupt(malformed)),
            WipeLeftover(path: misnamed, owner: nil, error: corrupt(misnamed)),
        ])
    }

    @Test("a key file of zeros only, what a destruction cut short between its overwrite and its unlink leaves, holds no key and is passed over")
    func zeroFilledKeyFileIsPassedOver() throws {
        let f = try Fixture()
        _ = try f.keys.currentKey(for: alice)
        writeRaw([UInt8](repeating: 0, count: 300), to: f.keys.directory + "/" + String(repeating: "c", count: 64) + ".key")
        #expect(try f.keys.identitiesWithKeys() == KeyListing(identities: [alice]))
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
