import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// Holes an adversarial review of the gate found (file-to-file streams, ProtectedFile, the runtime's own
/// directories, removeFiles, links), each asserted closed, and the attacks that held, kept as tests.
@Suite("Review regressions: handles, the runtime's own files, envelopes in files, links, private directories")
struct ReviewRegressionTests2 {
    /// An identity the Static fixture does not manage.
    let dave: Identity = "dave@unmanaged.example"

    private func envelopeBytes(_ f: Fixture, of plaintext: String, owner: Identity, as caller: Identity?) throws -> [UInt8] {
        let src = f.path("tmp-src-\(UUID().uuidString)")
        let out = f.path("tmp-out-\(UUID().uuidString)")
        defer { unlink(src); unlink(out) }
        writeRaw(Array(plaintext.utf8), to: src)
        try IdentityContext.withThreadIdentity(caller) {
            try f.files.protect(atPath: src, toPath: out, owner: owner)
        }
        return bytes(of: out)!
    }

    // MARK: ProtectedFile: a handle keeps the owner it had at open

    @Test("a file given to another owner is written anew: a handle opened before keeps the old content and never reaches the new owner's")
    func handOverWritesANewFile() throws {
        let f = try Fixture(encryptionRequired: false, isolated: true)
        let path = f.path("shared.txt")
        // dave (unmanaged) creates the file and keeps the handle.
        let handle = try IdentityContext.withThreadIdentity(dave) {
            try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create])
        }
        defer { try? handle.close() }
        try handle.write(Array("dave".utf8))
        // alice takes the file (allowed: dave's data is unmanaged) and writes her secret into it.
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.protect(atPath: path, owner: alice)
            let mine = try f.files.openProtectedFile(atPath: path, options: [.write])
            try mine.write(Array("ALICE-SECRET".utf8), at: 0)
            try mine.close()
        }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == alice)
        // dave's handle still reads dave's own bytes, from the file alice replaced, never hers ...
        let seen = try IdentityContext.withThreadIdentity(dave) { try handle.read(at: 0, upToCount: 64) }
        #expect(seen == Array("dave".utf8))
        // ... and what it writes does not reach alice's file.
        try IdentityContext.withThreadIdentity(dave) { try handle.write(Array("XXXX".utf8), at: 0) }
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) } == Data("ALICE-SECRET".utf8))
    }

    @Test("a handle on a file created for another owner needs the caller to be allowed to modify that owner's data")
    func createHandleForAnotherOwner() throws {
        for encrypted in [false, true] {
            let f = try Fixture(encryptionRequired: encrypted, isolated: true)
            let path = f.path("inbox-\(encrypted)")
            for caller in [bob, Identity.unmanaged, nil] as [Identity?] {
                let error = protectionError {
                    try IdentityContext.withThreadIdentity(caller) {
                        try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: alice)
                    }
                }
                #expect(error?.code == 108)
                #expect(!FileManager.default.fileExists(atPath: path))
            }
            // openFile the same: code with no identity creating a file in alice's directory would hold a handle
            // on alice's file.
            let directory = f.path("alices-\(encrypted)")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try IdentityContext.withThreadIdentity(alice) { try f.files.protectDirectory(atPath: directory, owner: alice) }
            #expect(protectionError {
                try IdentityContext.withThreadIdentity(nil) { try f.files.openFile(atPath: directory + "/new", options: [.write, .create]) }
            }?.code == 108)
            #expect(!FileManager.default.fileExists(atPath: directory + "/new"))
            // alice herself, and code running as alice with the owner named, open it.
            let handle = try IdentityContext.withThreadIdentity(alice) {
                try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: alice)
            }
            try handle.write(Array("mine".utf8))
            #expect(try handle.read(at: 0, upToCount: 4) == Array("mine".utf8))
            try handle.close()
        }
    }

    // MARK: The state directory is writable through the public file APIs

    @Test("writeFile into the state directory is refused (116): no planted wipe journal deletes alice's files and keys")
    func plantedWipeJournal() throws {
        let f = try Fixture(encryptionRequired: true, isolated: true)
        let path = f.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("secret".utf8)) }
        let journal = f.files.stateDirectory + "/wipes.journal"
        let planted = Data(#"{"format":1,"accounts":["alice@contoso.com"]}"#.utf8)
        let refused = IdentityContext.withThreadIdentity(nil) { (try? f.files.writeFile(atPath: journal, contents: planted)) == nil }
        #expect(refused, "writeFile into the state directory was allowed")
        // A restart (a new manager on the same state directory) finishes the "interrupted" wipe.
        _ = try? FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        #expect(FileManager.default.fileExists(atPath: path), "alice's file was deleted by a planted journal, without any check")
        let keysLeft = try FileManager.default.contentsOfDirectory(atPath: f.directory + "/keys").filter { $0.hasSuffix(".key") }
        #expect(!keysLeft.isEmpty, "alice's keys were destroyed by a planted journal")
    }

    @Test("unprotect(atPath:toPath:) into the state directory is refused (116)")
    func plantedWipeJournalViaUnprotect() throws {
        let f = try Fixture(encryptionRequired: true, isolated: true)
        let path = f.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("secret".utf8)) }
        let src = f.path("plain.json")
        writeRaw(Array(#"{"format":1,"accounts":["alice@contoso.com"]}"#.utf8), to: src)
        let journal = f.files.stateDirectory + "/wipes.journal"
        let refused = IdentityContext.withThreadIdentity(dave) { (try? f.files.unprotect(atPath: src, toPath: journal)) == nil }
        #expect(refused, "unprotect(atPath:toPath:) wrote into the state directory")
        _ = try? FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        #expect(FileManager.default.fileExists(atPath: path), "alice's file was deleted by a planted journal")
    }

    @Test("the owner index cannot be replaced through the file APIs (116): bob never reads alice's file")
    func replacedOwnerIndex() throws {
        let f = try Fixture(ownerStorage: .indexOnly, encryptionRequired: false, isolated: true)
        let path = f.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("ALICE-SECRET".utf8)) }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == alice)
        let index = f.files.stateDirectory + "/owners.index"
        let exists = FileManager.default.fileExists(atPath: index)
        let refused = IdentityContext.withThreadIdentity(nil) { (try? f.files.writeFile(atPath: index, contents: Data(#"{"format":1,"entries":{}}"#.utf8))) == nil }
        #expect(refused, "writeFile over owners.index (exists: \(exists)) was allowed")
        let fresh = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state",
                                              ownerStorage: .indexOnly)
        let leaked = IdentityContext.withThreadIdentity(bob) { try? fresh.readFile(atPath: path) }
        #expect(leaked == nil, "bob read alice's file after the index was replaced: \(String(decoding: leaked ?? Data(), as: UTF8.self))")
        let leakedSame = IdentityContext.withThreadIdentity(bob) { try? f.files.readFile(atPath: path) }
        #expect(leakedSame == nil, "bob read alice's file (same manager) after the index was replaced")
    }

    @Test("alice's key file cannot be replaced through the file APIs (116)")
    func replacedKeyFile() throws {
        let f = try Fixture(encryptionRequired: true, isolated: true)
        let path = f.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("ALICE-SECRET".utf8)) }
        let keyFiles = try FileManager.default.contentsOfDirectory(atPath: f.directory + "/keys").filter { $0.hasSuffix(".key") }
        var allowed: [String] = []
        for name in keyFiles {
            let ok = IdentityContext.withThreadIdentity(nil) {
                (try? f.files.writeFile(atPath: f.directory + "/keys/" + name, contents: Data("{}".utf8))) != nil
            }
            if ok { allowed.append(name) }
        }
        #expect(allowed.isEmpty, "code with no identity replaced key files: \(allowed)")
    }

    // MARK: unprotect(atPath:toPath:) gives the copy to the owner the (unauthenticated) envelope names

    @Test("unprotect of alice's file holding a clear envelope that names an unmanaged owner: the copy stays alice's")
    func unprotectReownsWithoutTransfer() throws {
        let f = try Fixture(encryptionRequired: false, isolated: true)
        let envelope = try envelopeBytes(f, of: "ALICE-SECRET", owner: dave, as: nil)
        let path = f.path("alice.idps")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data(envelope)) }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == alice)
        // The same hand-over through protect(atPath:) is refused (transfer alice -> dave).
        let sealedRefused = IdentityContext.withThreadIdentity(alice) {
            (try? f.files.protect(atPath: path, toPath: f.path("x.idps"), owner: dave)) == nil
        }
        #expect(sealedRefused)
        let copy = f.path("copy.txt")
        let unprotected = IdentityContext.withThreadIdentity(alice) { (try? f.files.unprotect(atPath: path, toPath: copy)) != nil }
        if unprotected {
            let owner = try f.files.protectionInfo(atPath: copy)?.owner
            #expect(owner == alice, "the copy of alice's data is owned by \(String(describing: owner))")
            let leaked = IdentityContext.withThreadIdentity(bob) { try? f.files.readFile(atPath: copy) }
            #expect(leaked == nil, "bob read alice's data from the copy: \(String(decoding: leaked ?? Data(), as: UTF8.self))")
        }
    }

    @Test("a clear envelope naming alice, planted by bob, is neither read by bob nor written over alice's file")
    func forgedEnvelopeNamingAlice() throws {
        let f = try Fixture(encryptionRequired: false, isolated: true)
        // dave crafts a clear envelope naming dave, then patches the owner name? Use a clear envelope of dave.
        let src = f.path("victim")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: src, contents: Data("ALICE".utf8)) }
        let envelope = try envelopeBytes(f, of: "BOB-CONTENT", owner: dave, as: nil)
        let mine = f.path("bob.idps")
        try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: mine, contents: Data(envelope)) }
        let replaced = IdentityContext.withThreadIdentity(bob) { (try? f.files.unprotect(atPath: mine, toPath: src)) != nil }
        #expect(!replaced)
        let content = IdentityContext.withThreadIdentity(alice) { try? f.files.readFile(atPath: src) }
        #expect(content == Data("ALICE".utf8))
    }

    // MARK: Links, special destinations

    @Test("symbolic and hard links to alice's file, as source or destination, give nobody else her data")
    func linksAsSourceAndDestination() throws {
        for storage in [OwnerStorage.automatic, .indexOnly] {
            let f = try Fixture(ownerStorage: storage, encryptionRequired: false, isolated: true)
            let victim = f.path("alice.txt")
            try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: victim, contents: Data("ALICE-SECRET".utf8)) }
            let sym = f.path("sym")
            let hard = f.path("hard")
            #expect(symlink(victim, sym) == 0)
            #expect(link(victim, hard) == 0)
            for source in [sym, hard, f.root + "/../root/alice.txt"] {
                let out = f.path("out-\(UUID().uuidString)")
                let ok = IdentityContext.withThreadIdentity(bob) { (try? f.files.protect(atPath: source, toPath: out, owner: bob)) != nil }
                #expect(!ok, "\(storage): bob sealed alice's file through \(source)")
                let ok2 = IdentityContext.withThreadIdentity(bob) { (try? f.files.unprotect(atPath: source, toPath: out)) != nil }
                #expect(!ok2, "\(storage): bob unprotected alice's file through \(source)")
                let ok3 = IdentityContext.withThreadIdentity(bob) { (try? f.files.decryptFile(atPath: source)) != nil }
                #expect(!ok3, "\(storage): bob decryptFile(atPath:) alice's clear file through \(source)")
            }
            // Destination: a symlink / hard link to alice's file.
            let bobsrc = f.path("bob.txt")
            try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: bobsrc, contents: Data("BOB".utf8)) }
            for dest in [sym, hard] {
                let ok = IdentityContext.withThreadIdentity(bob) { (try? f.files.protect(atPath: bobsrc, toPath: dest, owner: bob)) != nil }
                #expect(!ok, "\(storage): bob replaced \(dest)")
            }
            let content = IdentityContext.withThreadIdentity(alice) { try? f.files.readFile(atPath: victim) }
            #expect(content == Data("ALICE-SECRET".utf8))
        }
    }

    @Test("a FIFO or a directory as source or destination is refused without blocking")
    func fifoAndDirectory() throws {
        let f = try Fixture(encryptionRequired: false, isolated: true)
        let fifo = f.path("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let dir = f.path("dir")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        let src = f.path("src")
        try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: src, contents: Data("BOB".utf8)) }
        IdentityContext.withThreadIdentity(bob) {
            for dest in [fifo, dir] {
                #expect((try? f.files.protect(atPath: src, toPath: dest)) == nil)
                #expect((try? f.files.unprotect(atPath: src, toPath: dest)) == nil)
                #expect((try? f.files.decryptFile(atPath: src, toPath: dest)) == nil)
            }
            #expect((try? f.files.protect(atPath: dir, toPath: f.path("o1"))) == nil)
        }
    }

    @Test("chunk sizes out of range, and source == destination on another account's file, are refused")
    func chunkSizesAndSelf() throws {
        let f = try Fixture(encryptionRequired: true, isolated: true)
        let src = f.path("src")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: src, contents: Data("ALICE".utf8)) }
        for size in [0, -1, Int.min, 16 * 1024 * 1024 + 1, Int.max] {
            let ok = IdentityContext.withThreadIdentity(alice) { (try? f.files.protect(atPath: src, toPath: f.path("o"), chunkSize: size)) != nil }
            #expect(!ok, "chunk size \(size) accepted")
        }
        // bob: source == destination on alice's file.
        let ok = IdentityContext.withThreadIdentity(bob) { (try? f.files.protect(atPath: src, toPath: src, owner: bob)) != nil }
        #expect(!ok)
        let ok2 = IdentityContext.withThreadIdentity(bob) { (try? f.files.unprotect(atPath: src, toPath: src)) != nil }
        #expect(!ok2)
        let content = IdentityContext.withThreadIdentity(alice) { try? f.files.readFile(atPath: src) }
        #expect(content == Data("ALICE".utf8))
    }

    // MARK: removeFiles

    @Test("removeFiles(ownedByAnyOf:) with own and foreign accounts, or case variants of a name, deletes nothing")
    func removeMixed() throws {
        let f = try Fixture(encryptionRequired: true, isolated: true)
        let a = f.path("a"), b = f.path("b")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: a, contents: Data("A".utf8)) }
        try IdentityContext.withThreadIdentity(bob) { try f.files.writeFile(atPath: b, contents: Data("B".utf8)) }
        IdentityContext.withThreadIdentity(bob) {
            #expect((try? f.files.removeFiles(ownedByAnyOf: [bob, alice])) == nil)
            #expect((try? f.files.removeFiles(ownedBy: "ALICE@CONTOSO.COM")) == nil)
            #expect((try? f.files.removeFiles(ownedByAnyOf: [bob, "Alice@Contoso.com", ""])) == nil)
        }
        IdentityContext.withThreadIdentity(nil) {
            #expect((try? f.files.removeFiles(ownedBy: alice)) == nil)
        }
        #expect(FileManager.default.fileExists(atPath: a))
        #expect(FileManager.default.fileExists(atPath: b))
    }

    // MARK: Private directories

    @Test("a key or state directory given through a link is used by its real path: swapping the link later changes nothing")
    func privateDirectoryThroughALink() throws {
        let f = try Fixture(encryptionRequired: true, isolated: true)
        let open = f.directory + "/open"          // others may rename what is in it
        let safe = f.directory + "/safe"
        let other = f.directory + "/other"
        for directory in [open, safe, other] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false) }
        #expect(chmod(open, 0o777) == 0)
        #expect(symlink(safe, open + "/link") == 0)
        // Directly below the world-writable directory: refused.
        #expect(protectionErrorOrNil { _ = try FileKeyStore(atPath: open + "/keys") }?.code == 114)
        // Through the link: the store works in the directory the link pointed to when it was made.
        let keys = try FileKeyStore(atPath: open + "/link/keys")
        #expect(keys.directory == realPath(safe) + "/keys")
        let state = try FileProtectionManager(roots: [f.root], keyStore: keys, policy: f.policy, stateDirectory: open + "/link/state")
        #expect(state.stateDirectory == realPath(safe) + "/state")
        let data = DataProtectionManager(keyStore: keys, policy: f.policy)
        let envelope = try data.protect(Data("kept".utf8), owner: alice)
        // Someone who may write `open` points the link elsewhere: the store still reads its own keys.
        #expect(unlink(open + "/link") == 0 && symlink(other, open + "/link") == 0)
        let fresh = DataProtectionManager(keyStore: try FileKeyStore(atPath: realPath(safe) + "/keys"), policy: f.policy)
        #expect(try IdentityContext.withThreadIdentity(alice) { try fresh.unprotect(envelope) } == Data("kept".utf8))
        #expect(try IdentityContext.withThreadIdentity(alice) { try data.unprotect(envelope) } == Data("kept".utf8))
        #expect((try? FileManager.default.contentsOfDirectory(atPath: other)) == [])
    }

    @Test("a `..` path to a key directory is resolved before it is checked")
    func privateDirectoryDotDot() throws {
        let f = try Fixture(encryptionRequired: true, isolated: true)
        let open = f.directory + "/open2"
        try FileManager.default.createDirectory(atPath: open + "/sub", withIntermediateDirectories: true)
        #expect(chmod(open, 0o777) == 0)
        let keys = try FileKeyStore(atPath: open + "/sub/../../k2")
        #expect(keys.directory == realPath(f.directory) + "/k2")
    }
}

/// realpath(3) of an existing path.
func realPath(_ path: String) -> String {
    guard let resolved = realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
}

func protectionErrorOrNil(_ body: () throws -> Void) -> ProtectionError? {
    do { try body(); return nil } catch let e as ProtectionError { return e } catch { return .cryptoBackendFailure("\(error)") }
}
