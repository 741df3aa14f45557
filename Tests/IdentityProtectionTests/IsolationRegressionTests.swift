import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// A policy that shares reads of alice's data with bob but lets nobody but alice modify it (a policy the
/// protocol allows: `.modify` is answered separately from `.read`).
struct ReadOnlySharing: ManagedIdentityPolicy {
    let managed: Set<Identity>
    func isManaged(_ identity: Identity) -> Bool { managed.contains(identity) }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { true }
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        switch access {
        case .create: return nil
        case let .read(reader): return reader == owner || reader == bob ? nil : .accessDenied(identity: owner, reader: reader)
        case let .modify(writer): return writer == owner ? nil : .accessDenied(identity: owner, reader: writer)
        case let .transfer(to): return to == owner ? nil : .accessDenied(identity: owner, reader: to)
        }
    }
}

@Suite("Isolation regressions found by an adversarial review: copies, in-place decryption, links, case, directories, streams")
struct IsolationRegressionTests {
    // A1: decryptFile(atPath:toPath:) replaces whatever is at copyPath without asking the gate about its owner.
    @Test("A1 bob replaces alice's file through decryptFile(atPath: bobsFile, toPath: alicesFile)")
    func copyOverAnotherOwnersFile() throws {
        let f = try Fixture(isolated: true)
        let alices = f.path("alice.txt"), bobs = f.path("bob.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: alices, contents: Data("alice's".utf8)) }
        try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: bobs, contents: Data("bob's".utf8)) }
        // bob may not modify alice's data: writeFile over it is refused (this holds) ...
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: alices, contents: Data("x".utf8)) }
        }
        // ... but a copy onto it is not checked.
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(bob) { try f.files.decryptFile(atPath: bobs, toPath: alices) }
        }
        #expect(try f.files.protectionInfo(atPath: alices)?.owner == alice)
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: alices) } == Data("alice's".utf8))
    }

    // A1b: the same from code with no identity and an unowned file.
    @Test("A1b no-identity code replaces alice's file with decryptFile(atPath: unowned, toPath: alicesFile)")
    func copyOverFromNoIdentity() throws {
        let f = try Fixture(isolated: true)
        let alices = f.path("alice.txt"), unowned = f.path("unowned.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: alices, contents: Data("alice's".utf8)) }
        writeRaw(Array("attacker".utf8), to: unowned)
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(nil) { try f.files.decryptFile(atPath: unowned, toPath: alices) }
        }
        #expect(try f.files.protectionInfo(atPath: alices)?.owner == alice)
    }

    // A2: decryptFile(atPath:) rewrites the file in place (plaintext at rest) but asks only `.read`.
    @Test("A2 decryptFile(atPath:) in place is a modification but is checked as a read")
    func decryptInPlaceIsAModification() throws {
        let f = try Fixture(isolated: true)
        let policy = ReadOnlySharing(managed: [alice, bob])
        let files = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state-ro")
        let alices = f.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: alices, contents: Data("alice's".utf8)) }
        // bob may read (policy) ...
        #expect(try IdentityContext.withThreadIdentity(bob) { try files.readFile(atPath: alices) } == Data("alice's".utf8))
        // ... and may not modify: writeFile is refused (holds) ...
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(bob) { try files.writeFile(atPath: alices, contents: Data("x".utf8)) }
        }
        // ... but rewriting alice's encrypted file as plaintext is allowed.
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(bob) { try files.decryptFile(atPath: alices) }
        }
        #expect(try files.isFileEncrypted(atPath: alices))
    }


    // A4: a ProtectedFile opened by alice keeps reading and writing after alice stops being... (static policy)
    @Test("A4 handles opened before a policy change keep working (documenting)")
    func handleOutlivesPolicyChange() throws {
        let f = try Fixture(isolated: true)
        let path = f.path("a.bin")
        let file = try IdentityContext.withThreadIdentity(alice) {
            try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create])
        }
        try file.write(Data("one".utf8))
        // bob uses alice's handle: a handle carries no identity; it is a capability.
        try IdentityContext.withThreadIdentity(bob) { try file.write(Data("two".utf8)) }
        #expect(try IdentityContext.withThreadIdentity(bob) { try file.read(at: 0, upToCount: 6) } == Array("onetwo".utf8))
        try file.close()
    }

    // A5: hard link inside the root: alice's file through another name.
    @Test("A5 hard link and symlink to alice's file are refused to bob")
    func links() throws {
        let f = try Fixture(encryptionRequired: false, isolated: true)
        let alices = f.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: alices, contents: Data("alice's".utf8)) }
        try FileManager.default.linkItem(atPath: alices, toPath: f.path("hard"))
        try FileManager.default.createSymbolicLink(atPath: f.path("soft"), withDestinationPath: alices)
        for p in [f.path("hard"), f.path("soft"), f.root + "/./x/../hard"] {
            #expect(throws: ProtectionError.self) { try IdentityContext.withThreadIdentity(bob) { try f.files.readFile(atPath: p) } }
            #expect(throws: ProtectionError.self) {
                try IdentityContext.withThreadIdentity(bob) { try f.files.openFile(atPath: p, options: [.append]) }
            }
            #expect(throws: ProtectionError.self) {
                try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: p, contents: Data("x".utf8)) }
            }
            #expect(throws: ProtectionError.self) {
                try IdentityContext.withThreadIdentity(bob) { try f.files.openProtectedFile(atPath: p, options: [.write, .truncate], owner: alice) }
            }
        }
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: alices) } == Data("alice's".utf8))
    }

    // A6: case variants and "" vs nil.
    @Test("A6 case variants of the owner, '' and nil readers")
    func caseVariants() throws {
        let f = try Fixture(isolated: true)
        let sealed = try f.data.protect(Data("a".utf8), owner: "ALICE@CONTOSO.COM")
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.data.unprotect(sealed) } == Data("a".utf8))
        for reader in [bob, Identity.unmanaged, nil] as [Identity?] {
            #expect(throws: ProtectionError.self) { try IdentityContext.withThreadIdentity(reader) { try f.data.unprotect(sealed) } }
        }
    }

    // A7: no-identity code writes into alice's directory, then overwrites the file it created (owned by alice).
    @Test("A7 directory owner: code with no identity creates alice's files but may not modify them afterwards")
    func directoryOwner() throws {
        let f = try Fixture(isolated: true)
        let dir = f.path("alice-dir")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try IdentityContext.withThreadIdentity(alice) { try f.files.protectDirectory(atPath: dir) }
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: dir + "/f", contents: Data("alice".utf8)) }
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(nil) { try f.files.writeFile(atPath: dir + "/f", contents: Data("x".utf8)) }
        }
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(nil) { try f.files.openProtectedFile(atPath: dir + "/f", options: [.write, .truncate]) }
        }
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(bob) { try f.files.protectDirectory(atPath: dir, owner: bob) }
        }
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(nil) { try f.files.protectDirectory(atPath: dir, owner: nil) }
        }
        #expect(try f.files.ownerOfDirectory(atPath: dir) == alice)
    }

    // A8: streams: a stream given to unprotect(Data) and an envelope to the stream; splits; clear stream naming alice.
    @Test("A8 streams: formats, splits, clear stream naming a managed owner")
    func streams() async throws {
        let f = try Fixture(isolated: true)
        let stream = try await IdentityContext.withThreadIdentity(alice) {
            try f.data.protect([Array("hello".utf8)].async, owner: alice, chunkSize: 2)
        }.collect()
        let envelope = Array(try f.data.protect(Data("hello".utf8), owner: alice))
        #expect(throws: ProtectionError.self) { try f.data.unprotect(Data(stream)) }
        for input in [envelope, stream] {
            for cut in 0...input.count {
                let pieces: [[UInt8]] = [[], Array(input[..<cut]), [], Array(input[cut...]), []]
                let r1 = await outcome { try await IdentityContext.withThreadIdentity(bob) { f.data.unprotect(pieces.async) }.collect() }
                let r2 = await outcome { try await IdentityContext.withThreadIdentity(bob) { f.data.unprotect([input].async) }.collect() }
                #expect(r1 == r2, "cut \(cut)")
                #expect(r1 != "ok")
            }
        }
        // A clear stream whose header names alice (forged by anyone): bob refused
        var clear: [UInt8] = [0x89, 0x49, 0x44, 0x50, 0x53, 0x0D, 0x0A, 0x1A, 1, 0]
        clear += [0, UInt8(alice.name.utf8.count)] + Array(alice.name.utf8) + Array("forged".utf8)
        let r = await outcome { try await IdentityContext.withThreadIdentity(bob) { f.data.unprotect([clear].async) }.collect() }
        #expect(r == "108")
        // prefixes of magics
        for n in 1..<8 {
            let magic: [UInt8] = [0x89, 0x49, 0x44, 0x50, 0x53, 0x0D, 0x0A, 0x1A]; let m = Array(magic[..<n])
            let one = await outcome { try await f.data.unprotect([m].async).collect() }
            let bytes = m.map { [$0] }
            let split = await outcome { try await f.data.unprotect(bytes.async).collect() }
            #expect(one == "100" && split == "100", "\(n)")
            #expect(throws: ProtectionError.self) { try f.data.unprotect(Data(m)) }
        }
    }

    func outcome(_ body: () async throws -> [UInt8]) async -> String {
        do { _ = try await body(); return "ok" } catch let e as ProtectionError { return "\(e.code)" } catch { return "other" }
    }
}
