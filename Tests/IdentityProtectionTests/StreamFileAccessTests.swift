import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// `FileProtectionManager.protect(atPath:toPath:)` and `unprotect(atPath:toPath:)` decide from the
/// recorded owners of both files, like every other file API: a caller who may not read an account's file
/// cannot copy it out, and one who may not modify it cannot replace it.
@Suite("File-to-file stream forms: access from the recorded owners of source and destination")
struct StreamFileAccessTests {
    /// alice and bob managed, isolated; files in the clear so the source bytes are readable as they are.
    let f: Fixture
    let alices: String
    let bobs: String

    init() throws {
        f = try Fixture(encryptionRequired: false, isolated: true)
        alices = f.path("alice.txt")
        bobs = f.path("bob.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: alices, contents: Data("alice's secret".utf8)) }
        try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: bobs, contents: Data("bob's".utf8)) }
    }

    @Test("another account, the unmanaged account and code with no identity cannot copy alice's file out", arguments: [bob, Identity.unmanaged, nil] as [Identity?])
    func copyOutRefused(caller: Identity?) throws {
        let sealed = f.path("out.idps")
        for owner in [caller, alice, nil] as [Identity?] {
            let error = protectionError {
                try IdentityContext.withThreadIdentity(caller) { try f.files.protect(atPath: alices, toPath: sealed, owner: owner) }
            }
            #expect(error?.code == 108)
            #expect(!FileManager.default.fileExists(atPath: sealed))
        }
        // The same through unprotect: a file that is not an envelope is copied, so it is a read as well.
        let error = protectionError {
            try IdentityContext.withThreadIdentity(caller) { try f.files.unprotect(atPath: alices, toPath: sealed) }
        }
        #expect(error?.code == 108)
        #expect(!FileManager.default.fileExists(atPath: sealed))
    }

    @Test("alice's data does not become another account's envelope: that is a transfer")
    func sealingForAnotherOwnerIsATransfer() throws {
        let sealed = f.path("out.idps")
        let error = protectionError {
            try IdentityContext.withThreadIdentity(alice) { try f.files.protect(atPath: alices, toPath: sealed, owner: bob) }
        }
        #expect(error?.code == 108)
        #expect(!FileManager.default.fileExists(atPath: sealed))
    }

    @Test("nobody who may not modify alice's file replaces it with an envelope or a copy", arguments: [bob, Identity.unmanaged, nil] as [Identity?])
    func replacingRefused(caller: Identity?) throws {
        let unowned = f.path("unowned.bin")
        writeRaw(Array("attacker".utf8), to: unowned)
        let own = f.path("own.idps")
        try IdentityContext.withThreadIdentity(caller) { try f.files.protect(atPath: unowned, toPath: own) }
        let files = f.files, alices = alices
        let attempts: [() throws -> Void] = [
            { try files.protect(atPath: unowned, toPath: alices) },
            { try files.unprotect(atPath: own, toPath: alices) },
            { try files.unprotect(atPath: unowned, toPath: alices) },
        ]
        for attempt in attempts {
            #expect(protectionError { try IdentityContext.withThreadIdentity(caller) { try attempt() } }?.code == 108)
            #expect(try f.files.protectionInfo(atPath: alices)?.owner == alice)
            #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: alices) } == Data("alice's secret".utf8))
        }
    }

    @Test("the owner round-trips her file; both results are recorded as hers and go with her wipe")
    func ownerRoundTripAndWipe() throws {
        let sealed = f.path("alice.idps"), opened = f.path("alice.copy")
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.protect(atPath: alices, toPath: sealed)
            try f.files.unprotect(atPath: sealed, toPath: opened)
        }
        #expect(Data(bytes(of: sealed)!).range(of: Data("alice's secret".utf8)) == nil)
        #expect(bytes(of: opened) == Array("alice's secret".utf8))
        #expect(try f.files.protectionInfo(atPath: sealed)?.owner == alice)
        #expect(try f.files.protectionInfo(atPath: opened)?.owner == alice)
        // bob cannot open alice's envelope, nor a copy of it that he could place elsewhere.
        #expect(protectionError {
            try IdentityContext.withThreadIdentity(bob) { try f.files.unprotect(atPath: sealed, toPath: f.path("bob.copy")) }
        }?.code == 108)
        let removed = try IdentityContext.withThreadIdentity(alice) { try f.files.removeFiles(ownedBy: alice) }.sorted()
        #expect(removed == [alices, opened, sealed].sorted())
        #expect(FileManager.default.fileExists(atPath: bobs))
    }

    @Test("a source encrypted at rest is decrypted while it is sealed; only its owner may do it")
    func encryptedSource() throws {
        let g = try Fixture(encryptionRequired: true, isolated: true)
        let file = g.path("a.bin"), sealed = g.path("a.idps"), opened = g.path("a.out")
        let payload = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try IdentityContext.withThreadIdentity(alice) { try g.files.writeFile(atPath: file, contents: payload) }
        #expect(try g.files.isFileEncrypted(atPath: file))
        #expect(protectionError {
            try IdentityContext.withThreadIdentity(bob) { try g.files.protect(atPath: file, toPath: sealed, owner: bob) }
        }?.code == 108)
        try IdentityContext.withThreadIdentity(alice) {
            try g.files.protect(atPath: file, toPath: sealed)
            try g.files.unprotect(atPath: sealed, toPath: opened)
        }
        #expect(bytes(of: opened).map { Data($0) } == payload)
        // An encrypted file is not a stream envelope: unprotecting it is an error, never its bytes.
        #expect(protectionError {
            try IdentityContext.withThreadIdentity(alice) { try g.files.unprotect(atPath: file, toPath: g.path("raw")) }
        }?.code == 100)
    }

    @Test("removeFiles(ownedBy:) is a modification of the account's data: nobody else deletes it", arguments: [bob, Identity.unmanaged, nil] as [Identity?])
    func wipeIsGated(caller: Identity?) throws {
        let error = protectionError { try IdentityContext.withThreadIdentity(caller) { try f.files.removeFiles(ownedBy: alice) } }
        #expect(error?.code == 108)
        #expect(protectionError {
            try IdentityContext.withThreadIdentity(caller) { try f.files.removeFiles(ownedByAnyOf: [bob, alice]) }
        }?.code == 108)
        #expect(FileManager.default.fileExists(atPath: alices) && FileManager.default.fileExists(atPath: bobs))
        // The keys survive a refused wipe: alice still reads her envelopes.
        let envelope = try f.data.protect(Data("kept".utf8), owner: alice)
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.data.unprotect(envelope) } == Data("kept".utf8))
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.removeFiles(ownedBy: alice) } == [alices])
    }
}
