import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("FileProtectionManager: selective wipe")
struct WipeTests {
    @Test("removeFiles(ownedBy:) deletes exactly the owner's files and shreds its keys",
          arguments: [OwnerStorage.automatic, .indexOnly])
    func wipe(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let outside = f.directory + "/outside"
        try FileManager.default.createDirectory(atPath: f.path("deep/er"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.writeFile(atPath: f.path("a1.txt"), contents: Data("a1".utf8))
            try f.files.writeFile(atPath: f.path("deep/er/a2.txt"), contents: Data("a2".utf8))
            try f.files.writeFile(atPath: outside + "/a3.txt", contents: Data("a3".utf8))
        }
        try IdentityContext.withThreadIdentity("ALICE@contoso.com") {
            try f.files.writeFile(atPath: f.path("deep/a4.txt"), contents: Data("a4".utf8))
        }
        try IdentityContext.withThreadIdentity(bob) {
            try f.files.writeFile(atPath: f.path("b1.txt"), contents: Data("b1".utf8))
        }
        try IdentityContext.withThreadIdentity(carol) {
            try f.files.writeFile(atPath: f.path("deep/c1.txt"), contents: Data("c1".utf8))
        }
        writeRaw([1], to: f.path("unowned.txt"))
        try FileManager.default.createSymbolicLink(atPath: f.path("link-to-outside"), withDestinationPath: outside)
        let sealed = try f.data.protect(Data("memo".utf8), owner: alice)
        let removed = try f.files.removeFiles(ownedBy: alice)
        #expect(removed == [f.path("a1.txt"), f.path("deep/a4.txt"), f.path("deep/er/a2.txt")])
        for name in ["b1.txt", "deep/c1.txt", "unowned.txt", "deep/er", "link-to-outside"] {
            #expect(FileManager.default.fileExists(atPath: f.path(name)), "\(name)")
        }
        #expect(FileManager.default.fileExists(atPath: outside + "/a3.txt"))   // outside the roots
        #expect(try f.files.readFile(atPath: f.path("b1.txt")) == Data("b1".utf8))
        // Crypto-shredding: data protected for alice and her file outside the roots are unreadable now.
        #expect(protectionError { try f.data.unprotect(sealed) }?.code == 103)
        #expect(protectionError { try f.files.readFile(atPath: outside + "/a3.txt") }?.code == 103)
        // A second wipe finds nothing.
        #expect(try f.files.removeFiles(ownedBy: alice) == [])
    }

    @Test("a root given as a symbolic link to a directory is wiped like the directory")
    func rootBehindSymbolicLink() throws {
        let f = try Fixture()
        let linked = f.directory + "/linked-root"
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: f.root)
        let files = try FileProtectionManager(
            roots: [linked], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state-linked")
        try IdentityContext.withThreadIdentity(alice) {
            try files.writeFile(atPath: linked + "/a.txt", contents: Data("a".utf8))
        }
        try IdentityContext.withThreadIdentity(bob) {
            try files.writeFile(atPath: linked + "/b.txt", contents: Data("b".utf8))
        }
        #expect(try files.ownersUnderRoots() == [alice, bob])
        #expect(try files.removeFiles(ownedBy: alice).count == 1)
        #expect(!FileManager.default.fileExists(atPath: f.path("a.txt")))
        #expect(try IdentityContext.withThreadIdentity(bob) { try files.readFile(atPath: linked + "/b.txt") } == Data("b".utf8))
    }

    @Test("an encrypted file whose recorded owner was lost is still found by its header")
    func headerOwner() throws {
        let f = try Fixture()
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.writeFile(atPath: f.path("a.txt"), contents: Data("a".utf8))
        }
        // Copy it the way a tool that drops extended attributes would.
        let copy = f.path("copied.txt")
        writeRaw(bytes(of: f.path("a.txt"))!, to: copy)
        #expect(try f.files.removeFiles(ownedBy: alice).count == 2)
    }

    @Test("the unmanaged identity cannot be wiped: 104")
    func unmanaged() throws {
        let f = try Fixture()
        writeRaw([1], to: f.path("x"))
        try f.files.protect(atPath: f.path("x"), owner: .unmanaged)
        #expect(protectionError { try f.files.removeFiles(ownedBy: .unmanaged) }?.code == 104)
        #expect(FileManager.default.fileExists(atPath: f.path("x")))
    }
}

@Suite("FileProtectionManager: temporary files of interrupted atomic writes")
struct InterruptedWriteTests {
    @Test("abandoned temporary files go, ones being written (locked) or too recent stay, other files stay")
    func sweep() throws {
        let f = try Fixture()
        try FileManager.default.createDirectory(atPath: f.path("sub"), withIntermediateDirectories: true)
        let abandoned = [f.path(".a.txt.idp-1x2y.tmp"), f.path("sub/.b.bin.idp-zz.tmp"), f.directory + "/state/.owners.index.idp-q.tmp"]
        let locked = f.path(".c.txt.idp-live.tmp")
        let recent = f.path(".d.txt.idp-new.tmp")
        let others = [f.path("e.tmp"), f.path(".f.idp-x.txt"), f.path("g.txt")]
        let old = Date(timeIntervalSinceNow: -3600)
        for path in abandoned + [locked] + others { writeRaw([1, 2, 3], to: path) }
        try f.files.protect(atPath: abandoned[0], owner: alice)
        #expect(try f.files.ownersUnderRoots() == [alice])
        for path in abandoned + [locked] + others {
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: path)
        }
        writeRaw([4], to: recent)
        let fd = open(locked, O_RDONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)

        let removed = try f.files.removeInterruptedWrites(olderThan: 60)
        #expect(removed == abandoned.sorted())
        for path in abandoned { #expect(!FileManager.default.fileExists(atPath: path)) }
        for path in [locked, recent] + others { #expect(FileManager.default.fileExists(atPath: path), "\(path)") }
        #expect(try f.files.ownersUnderRoots().isEmpty, "the removed file's owner is forgotten")
        #expect(try f.files.removeInterruptedWrites(olderThan: 0) == [recent])
    }
}
