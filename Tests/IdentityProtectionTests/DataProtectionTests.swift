import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("DataProtectionManager: envelopes")
struct DataProtectionTests {
    @Test("managed identity: encrypted, owner in the header, round trip")
    func managedRoundTrip() throws {
        let f = try Fixture()
        let plaintext = Data("quarterly numbers".utf8)
        let sealed = try f.data.protect(plaintext, owner: alice)
        #expect(sealed.range(of: plaintext) == nil)
        let info = try #require(try f.data.protectionInfo(sealed))
        #expect(info.owner == alice)
        #expect(info.isEncrypted)
        #expect(info.keyID != nil)
        #expect(info.formatVersion == 1)
        #expect(try f.data.unprotect(sealed) == plaintext)
        // Two envelopes of the same data differ (random nonce).
        #expect(try f.data.protect(plaintext, owner: alice) != sealed)
    }

    @Test("empty and larger payloads", arguments: [0, 1, 15, 16, 17, 4096, 1 << 20])
    func sizes(count: Int) throws {
        let f = try Fixture()
        let plaintext = Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let sealed = try f.data.protect(plaintext, owner: bob)
        #expect(try f.data.unprotect(sealed) == plaintext)
    }

    @Test("unmanaged, not-managed and no identity: header only, body in the clear",
          arguments: [Identity.unmanaged, carol])
    func clear(identity: Identity) throws {
        let f = try Fixture()
        let plaintext = Data("public".utf8)
        let sealed = try f.data.protect(plaintext, owner: identity)
        #expect(sealed.suffix(plaintext.count) == plaintext)
        let info = try #require(try f.data.protectionInfo(sealed))
        #expect(info.owner == identity)
        #expect(!info.isEncrypted)
        #expect(info.keyID == nil)
        #expect(try f.data.unprotect(sealed) == plaintext)
    }

    @Test("identity nil: the effective file identity of the caller")
    func effectiveIdentity() async throws {
        let f = try Fixture()
        let sealed = try IdentityContext.withThreadIdentity(bob) {
            try f.data.protect(Data("x".utf8))
        }
        #expect(try f.data.protectionInfo(sealed)?.owner == bob)
        let detached = try await Task.detached { try f.data.protect(Data("y".utf8)) }.value
        #expect(try f.data.protectionInfo(detached)?.owner == IdentityContext.processIdentity ?? .unmanaged)
        let inTask = try await IdentityContext.withThreadIdentity(alice) {
            try await Task { try f.data.protect(Data("z".utf8)) }.value
        }
        #expect(try f.data.protectionInfo(inTask)?.owner == alice)
    }

    @Test("unprotected data comes back unchanged; protectionInfo is nil",
          arguments: [Data(), Data("hello".utf8), Data([0x00, 0x89, 0x49]), Data(repeating: 0x41, count: 100)])
    func unprotected(data: Data) throws {
        let f = try Fixture()
        #expect(try f.data.unprotect(data) == data)
        #expect(try f.data.protectionInfo(data) == nil)
    }

    @Test("strings: base64 envelopes; plain strings unchanged")
    func strings() throws {
        let f = try Fixture()
        let sealed = try f.data.protect("Grüße, Ωmega", owner: alice)
        #expect(Data(base64Encoded: sealed) != nil)
        #expect(try f.data.protectionInfo(sealed)?.owner == alice)
        #expect(try f.data.unprotect(sealed) == "Grüße, Ωmega")
        #expect(try f.data.unprotect("just text") == "just text")
        #expect(try f.data.protectionInfo("just text") == nil)
        let clear = try f.data.protect("hi", owner: carol)
        #expect(try f.data.unprotect(clear) == "hi")
    }

    @Test("owner casing: a case variant reads the same keys")
    func caseVariant() throws {
        let f = try Fixture()
        let sealed = try f.data.protect(Data("x".utf8), owner: "ALICE@CONTOSO.COM")
        #expect(try f.data.protectionInfo(sealed)?.owner == alice)
        let other = try f.data.protect(Data("y".utf8), owner: alice)
        #expect(try f.data.protectionInfo(sealed)?.keyID == f.data.protectionInfo(other)?.keyID)
        #expect(try f.data.unprotect(sealed) == Data("x".utf8))
    }

    @Test("key rotation: new data uses the new key, old data stays readable")
    func rotation() throws {
        let f = try Fixture()
        let old = try f.data.protect(Data("old".utf8), owner: alice)
        let newKey = try f.keys.rotateKey(for: alice)
        let new = try f.data.protect(Data("new".utf8), owner: alice)
        #expect(try f.data.protectionInfo(new)?.keyID == newKey.id)
        #expect(try f.data.protectionInfo(old)?.keyID != newKey.id)
        #expect(try f.data.unprotect(old) == Data("old".utf8))
        #expect(try f.data.unprotect(new) == Data("new".utf8))
        // A second key store instance on the same directory reads both.
        let reopened = DataProtectionManager(keyStore: try FileKeyStore(atPath: f.keys.directory), policy: f.policy)
        #expect(try reopened.unprotect(old) == Data("old".utf8))
        #expect(try reopened.unprotect(new) == Data("new".utf8))
    }

    @Test("cached keys follow rotation and destruction, and another store's rotation is found")
    func cachedKeysStayCurrent() throws {
        let f = try Fixture()
        let first = try f.keys.currentKey(for: alice)
        #expect(try f.keys.currentKey(for: "Alice@Contoso.com").id == first.id)
        let rotated = try f.keys.rotateKey(for: alice)
        #expect(try f.keys.currentKey(for: alice).id == rotated.id)
        #expect(try f.keys.key(withID: first.id, for: alice).material == first.material)
        // Another store on the directory rotates: this store still answers its cached current key, and finds
        // the new key by id.
        let other = try FileKeyStore(atPath: f.keys.directory)
        let third = try other.rotateKey(for: alice)
        #expect(try f.keys.key(withID: third.id, for: alice).material == third.material)
        // After destruction nothing cached survives: the old ids are gone and a new current key is made.
        try f.keys.destroyKeys(for: alice)
        #expect(protectionError { try f.keys.key(withID: rotated.id, for: alice) }?.code == 103)
        let fresh = try f.keys.currentKey(for: alice)
        #expect(![first.id, rotated.id, third.id].contains(fresh.id))
    }

    @Test("destroyed keys: crypto-shredded data is 103, other identities unaffected")
    func shredding() throws {
        let f = try Fixture()
        let a = try f.data.protect(Data("a".utf8), owner: alice)
        let b = try f.data.protect(Data("b".utf8), owner: bob)
        try f.keys.destroyKeys(for: alice)
        #expect(protectionError { try f.data.unprotect(a) }?.code == 103)
        let fresh = DataProtectionManager(keyStore: try FileKeyStore(atPath: f.keys.directory), policy: f.policy)
        #expect(protectionError { try fresh.unprotect(a) }?.code == 103)
        #expect(try f.data.unprotect(b) == Data("b".utf8))
        // The header is still readable.
        #expect(try f.data.protectionInfo(a)?.owner == alice)
    }

    @Test("another key store (missing key) is 103; a wrong key with the same id is 102")
    func wrongKey() throws {
        let f = try Fixture()
        let sealed = try f.data.protect(Data("secret".utf8), owner: alice)
        let other = try Fixture()
        #expect(protectionError { try other.data.unprotect(sealed) }?.code == 103)
        let keyID = try #require(try f.data.protectionInfo(sealed)?.keyID)
        let impostor = DataProtectionManager(keyStore: FixedKeyStore(key: try ProtectionKey(
            id: keyID, material: [UInt8](repeating: 7, count: 32))), policy: f.policy)
        #expect(protectionError { try impostor.unprotect(sealed) } == .authenticationFailed)
    }

    @Test("key files: mode 0600 in a 0700 directory, no identity names in file names")
    func keyFiles() throws {
        let f = try Fixture()
        _ = try f.data.protect(Data("x".utf8), owner: alice)
        let names = try FileManager.default.contentsOfDirectory(atPath: f.keys.directory)
        #expect(names.count == 1)
        #expect(names.allSatisfy { $0.hasSuffix(".key") && !$0.contains("alice") })
        let fileAttributes = try FileManager.default.attributesOfItem(atPath: f.keys.directory + "/" + names[0])
        #expect((fileAttributes[.posixPermissions] as? Int) == 0o600)
        let directoryAttributes = try FileManager.default.attributesOfItem(atPath: f.keys.directory)
        #expect((directoryAttributes[.posixPermissions] as? Int) == 0o700)
    }

    @Test("the unmanaged identity has no keys")
    func unmanagedKeys() throws {
        let f = try Fixture()
        #expect(protectionError { try f.keys.currentKey(for: .unmanaged) }?.code == 104)
    }

    @Test("error codes are stable")
    func codes() {
        let errors: [ProtectionError] = [
            .invalidEnvelope(reason: ""), .unsupportedVersion(2), .authenticationFailed,
            .keyNotFound(identity: alice, keyID: nil), .invalidIdentity(reason: ""), .fileNotFound(path: ""),
            .ioFailure(path: "", operation: "", errno: 13), .cryptoBackendFailure(""),
        ]
        #expect(errors.map(\.code) == Array(100...107))
        #expect(errors.allSatisfy { $0.description.contains("\($0.code)") })
    }
}

/// Always answers with one key, whatever is asked.
struct FixedKeyStore: KeyStore {
    let key: ProtectionKey
    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { key }
    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey { key }
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { key }
    func destroyKeys(for identity: Identity) throws(ProtectionError) {}
}

@Suite("Decoded owner fields are remembered by their bytes")
struct DecodedOwnerCacheTests {
    @Test("alternating owners, case variants and a malformed owner each decode to what their bytes say")
    func alternating() throws {
        let f = try Fixture()
        let upper = Identity("ALICE@contoso.com")
        let sealed = try [alice, bob, upper, alice, carol, bob].map { (owner: Identity) throws -> (Identity, Data) in
            (owner, try f.data.protect(Data([1, 2, 3]), owner: owner))
        }
        for _ in 0..<3 {
            for (owner, envelope) in sealed {
                let info = try #require(try f.data.protectionInfo(envelope))
                #expect(info.owner.name == owner.name, "the owner's name as written, not a cached case variant")
                #expect(info.owner == owner)
            }
        }
        // A malformed owner field (control character) is refused even after valid ones were remembered.
        var damaged = Array(sealed[0].1)
        let at = try #require(damaged.firstIndex(of: UInt8(ascii: "@")))
        damaged[at] = 0x07
        #expect(throws: ProtectionError.self) { try f.data.protectionInfo(Data(damaged)) }
        #expect(protectionError { try f.data.protectionInfo(Data(damaged)) }?.code == 104)
    }
}
