import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("Directory owners: protectDirectory(atPath:owner:)")
struct DirectoryOwnerTests {
    @Test("files created inside get the directory's owner unless the thread has its own identity",
          arguments: [OwnerStorage.automatic, .indexOnly])
    func precedence(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let directory = f.path("alice-docs")
        try FileManager.default.createDirectory(atPath: directory + "/nested", withIntermediateDirectories: true)
        try f.files.protectDirectory(atPath: directory, owner: alice)
        #expect(try f.files.ownerOfDirectory(atPath: directory) == alice)
        #expect(try f.files.ownerOfDirectory(atPath: directory + "/nested") == nil)
        IdentityContext.withThreadIdentity(nil) {
            // No thread identity: the nearest owned directory decides (it outranks the process identity).
            #expect(throws: Never.self) {
                try f.files.writeFile(atPath: directory + "/a.txt", contents: Data("a".utf8))
                try f.files.writeFile(atPath: directory + "/nested/b.txt", contents: Data("b".utf8))
                let file = try f.files.openProtectedFile(atPath: directory + "/c.bin", options: [.write, .create])
                #expect(file.owner == alice && file.isEncrypted)
                try file.close()
            }
        }
        #expect(try f.files.protectionInfo(atPath: directory + "/a.txt")?.owner == alice)
        #expect(try f.files.protectionInfo(atPath: directory + "/a.txt")?.isEncrypted == true)
        #expect(try f.files.protectionInfo(atPath: directory + "/nested/b.txt")?.owner == alice)
        // A thread identity, even the unmanaged one, wins over the directory.
        try IdentityContext.withThreadIdentity(carol) {
            try f.files.writeFile(atPath: directory + "/carol.txt", contents: Data("c".utf8))
        }
        #expect(try f.files.protectionInfo(atPath: directory + "/carol.txt")?.owner == carol)
        try IdentityContext.withThreadIdentity(.unmanaged) {
            try f.files.writeFile(atPath: directory + "/web.txt", contents: Data("w".utf8))
        }
        #expect(try f.files.protectionInfo(atPath: directory + "/web.txt")?.owner == .unmanaged)
        // An explicit owner wins over everything.
        let explicit = try IdentityContext.withThreadIdentity(carol) {
            try f.files.openProtectedFile(atPath: directory + "/bob.bin", options: [.write, .create], owner: bob)
        }
        #expect(explicit.owner == bob)
        try explicit.close()
        // A nested directory with its own owner is nearer.
        try f.files.protectDirectory(atPath: directory + "/nested", owner: bob)
        IdentityContext.withThreadIdentity(nil) {
            #expect(throws: Never.self) { try f.files.writeFile(atPath: directory + "/nested/d.txt", contents: Data("d".utf8)) }
        }
        #expect(try f.files.protectionInfo(atPath: directory + "/nested/d.txt")?.owner == bob)
        // Removing the owner.
        try IdentityContext.withThreadIdentity(nil) {
            try f.files.protectDirectory(atPath: directory + "/nested", owner: nil)
        }
        #expect(try f.files.ownerOfDirectory(atPath: directory + "/nested") == IdentityContext.processIdentity)
        #expect(protectionError { try f.files.protectDirectory(atPath: f.path("missing")) }?.code == 105)
        #expect(protectionError { try f.files.protectDirectory(atPath: directory + "/a.txt", owner: alice) }?.code == 105)
    }
}

@Suite("Directory owners and the selective wipe")
struct DirectoryOwnerWipeTests {
    @Test("a wipe removes the account's files and its directory owners; other directories keep theirs")
    func wipe() throws {
        let f = try Fixture()
        for name in ["a", "b"] { try FileManager.default.createDirectory(atPath: f.path(name), withIntermediateDirectories: false) }
        try f.files.protectDirectory(atPath: f.path("a"), owner: alice)
        try f.files.protectDirectory(atPath: f.path("b"), owner: bob)
        try f.files.protectDirectory(atPath: f.root, owner: alice)
        IdentityContext.withThreadIdentity(nil) {
            #expect(throws: Never.self) { try f.files.writeFile(atPath: f.path("a/x.txt"), contents: Data("x".utf8)) }
        }
        let removed = try f.files.removeFiles(ownedBy: alice)
        #expect(removed == [f.path("a/x.txt")])
        #expect(try f.files.ownerOfDirectory(atPath: f.path("a")) == nil)
        #expect(try f.files.ownerOfDirectory(atPath: f.root) == nil)
        #expect(try f.files.ownerOfDirectory(atPath: f.path("b")) == bob)
        #expect(FileManager.default.fileExists(atPath: f.path("a")))
    }
}
