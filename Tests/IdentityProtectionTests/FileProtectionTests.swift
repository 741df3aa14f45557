import Foundation
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("FileProtectionManager: owners and encryption at rest")
struct FileProtectionTests {
    @Test("writeFile: owner is the effective file identity; managed files encrypted at rest",
          arguments: [OwnerStorage.automatic, .indexOnly])
    func writeFileOwners(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let contents = Data("alice's notes".utf8)
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.writeFile(atPath: f.path("a.txt"), contents: contents)
        }
        try IdentityContext.withThreadIdentity(carol) {
            try f.files.writeFile(atPath: f.path("c.txt"), contents: contents)
        }
        try IdentityContext.withThreadIdentity(nil) {
            try f.files.writeFile(atPath: f.path("none.txt"), contents: contents)
        }
        let a = try #require(try f.files.protectionInfo(atPath: f.path("a.txt")))
        #expect(a.owner == alice && a.isEncrypted)
        #expect(try f.files.isFileEncrypted(atPath: f.path("a.txt")))
        #expect(bytes(of: f.path("a.txt"))!.count > contents.count)
        #expect(Data(bytes(of: f.path("a.txt"))!).range(of: contents) == nil)
        #expect(try f.files.readFile(atPath: f.path("a.txt")) == contents)
        let c = try #require(try f.files.protectionInfo(atPath: f.path("c.txt")))
        #expect(c.owner == carol && !c.isEncrypted)
        #expect(bytes(of: f.path("c.txt")) == Array(contents))
        #expect(try f.files.protectionInfo(atPath: f.path("none.txt")) == nil)
        #expect(try f.files.readFile(atPath: f.path("none.txt")) == contents)
        // Replacing a file gives it the new writer as owner.
        try IdentityContext.withThreadIdentity(bob) {
            try f.files.writeFile(atPath: f.path("c.txt"), contents: Data("bob's now".utf8))
        }
        #expect(try f.files.protectionInfo(atPath: f.path("c.txt"))?.owner == bob)
        #expect(try f.files.readFile(atPath: f.path("c.txt")) == Data("bob's now".utf8))
    }

    @Test("policy without file encryption: managed owners recorded, content in the clear")
    func noEncryptionRequired() throws {
        let f = try Fixture(encryptionRequired: false)
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.writeFile(atPath: f.path("a.txt"), contents: Data("x".utf8))
        }
        let info = try #require(try f.files.protectionInfo(atPath: f.path("a.txt")))
        #expect(info.owner == alice && !info.isEncrypted)
    }

    @Test("process identity is the fallback file identity")
    func processIdentityFallback() async throws {
        let f = try Fixture()
        // Only threads without a thread identity see the process identity; keep the global untouched and
        // check the rule through a thread identity of nil with `.assign` semantics instead.
        let owner = try await Task.detached {
            try f.files.writeFile(atPath: f.path("d.txt"), contents: Data())
            return try f.files.protectionInfo(atPath: f.path("d.txt"))?.owner
        }.value
        #expect(owner == IdentityContext.processIdentity)
    }

    @Test("openFile: creating or truncating sets the owner; plain opens keep it",
          arguments: [OwnerStorage.automatic, .indexOnly])
    func openFileOwners(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let path = f.path("log.txt")
        try IdentityContext.withThreadIdentity(carol) {
            let handle = try f.files.openFile(atPath: path, options: [.write, .create])
            try handle.write(contentsOf: Data("one".utf8))
            try handle.close()
        }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == carol)
        try IdentityContext.withThreadIdentity(bob) {
            let handle = try f.files.openFile(atPath: path, options: [.write, .append, .create])
            try handle.write(contentsOf: Data("two".utf8))
            try handle.close()
        }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == carol)
        #expect(bytes(of: path) == Array("onetwo".utf8))
        // bob's files must be encrypted: a plaintext handle that would make bob the owner is refused (110)
        // before anything is truncated.
        #expect(IdentityContext.withThreadIdentity(bob) {
            protectionError { try f.files.openFile(atPath: path, options: [.write, .truncate]) }?.code
        } == 110)
        #expect(bytes(of: path) == Array("onetwo".utf8))
        let dave: Identity = "dave@fabrikam.com"
        try IdentityContext.withThreadIdentity(dave) {
            let handle = try f.files.openFile(atPath: path, options: [.write, .truncate])
            try handle.close()
        }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == dave)
        #expect(bytes(of: path) == [])
        #expect(protectionError { try f.files.openFile(atPath: path, options: [.write, .create, .exclusive]) }?.code == 106)
        #expect(protectionError { try f.files.openFile(atPath: f.path("missing"), options: [.read]) }?.code == 105)
        #expect(protectionError { try f.files.openFile(atPath: f.root, options: [.read]) }?.code == 105)
    }

    @Test("protect(atPath:owner:) and protectionInfo(atPath:)", arguments: [OwnerStorage.automatic, .indexOnly])
    func explicitOwner(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let path = f.path("report.txt")
        writeRaw(Array("numbers".utf8), to: path)
        #expect(try f.files.protectionInfo(atPath: path) == nil)
        try f.files.protect(atPath: path, owner: carol)
        #expect(try f.files.protectionInfo(atPath: path)?.owner == carol)
        #expect(bytes(of: path) == Array("numbers".utf8))
        try f.files.protect(atPath: path, owner: alice)       // managed + required: encrypted in place
        let info = try #require(try f.files.protectionInfo(atPath: path))
        #expect(info.owner == alice && info.isEncrypted)
        try f.files.protect(atPath: path, owner: bob)         // re-encrypted for bob
        #expect(try f.files.protectionInfo(atPath: path)?.owner == bob)
        #expect(try f.files.readFile(atPath: path) == Data("numbers".utf8))
        try f.files.protect(atPath: path, owner: .unmanaged)  // decrypted, owned by ""
        #expect(try f.files.protectionInfo(atPath: path) == ProtectionInfo(owner: .unmanaged, isEncrypted: false, keyID: nil, formatVersion: nil))
        #expect(bytes(of: path) == Array("numbers".utf8))
    }

    @Test("owners survive rename within the roots", arguments: [OwnerStorage.automatic, .indexOnly])
    func rename(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        try FileManager.default.createDirectory(atPath: f.path("sub"), withIntermediateDirectories: true)
        try IdentityContext.withThreadIdentity(carol) {
            try f.files.writeFile(atPath: f.path("plain.txt"), contents: Data("p".utf8))
        }
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.writeFile(atPath: f.path("secret.txt"), contents: Data("s".utf8))
        }
        try FileManager.default.moveItem(atPath: f.path("plain.txt"), toPath: f.path("sub/moved.txt"))
        try FileManager.default.moveItem(atPath: f.path("secret.txt"), toPath: f.path("sub/secret2.txt"))
        #expect(try f.files.protectionInfo(atPath: f.path("sub/moved.txt"))?.owner == carol)
        #expect(try f.files.protectionInfo(atPath: f.path("sub/secret2.txt"))?.owner == alice)
        #expect(try f.files.readFile(atPath: f.path("sub/secret2.txt")) == Data("s".utf8))
    }

    @Test("encryptFile / decryptFile in place, across chunk sizes",
          arguments: [0, 1, 15, 16, 17, 48, 1000])
    func encryptDecrypt(size: Int) throws {
        let f = try Fixture(chunkSize: 16)
        let path = f.path("data.bin")
        let original = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        writeRaw(original, to: path)
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
        try f.files.encryptFile(atPath: path, owner: alice)
        #expect(try f.files.isFileEncrypted(atPath: path))
        #expect(try f.files.protectionInfo(atPath: path)?.owner == alice)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o640)
        let encrypted = try #require(bytes(of: path))
        #expect(encrypted.count == encryptedFileLength(owner: alice, chunkSize: 16, contentLength: size))
        try f.files.encryptFile(atPath: path, owner: alice)          // already encrypted for alice: unchanged
        #expect(bytes(of: path) == encrypted)
        let copy = f.path("copy.bin")
        try f.files.decryptFile(atPath: path, toPath: copy)
        #expect(bytes(of: copy) == original)
        #expect(bytes(of: path) == encrypted)
        #expect(try f.files.protectionInfo(atPath: copy)?.owner == alice)
        try f.files.decryptFile(atPath: path)
        #expect(bytes(of: path) == original)
        #expect(try f.files.protectionInfo(atPath: path) == ProtectionInfo(owner: alice, isEncrypted: false, keyID: nil, formatVersion: nil))
        try f.files.decryptFile(atPath: path)                      // not encrypted: no-op
        #expect(bytes(of: path) == original)
        // No temporary files left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root).sorted() == ["copy.bin", "data.bin"])
    }

    @Test("large file streamed with the default 64 KiB chunks")
    func largeFile() throws {
        let f = try Fixture()
        let path = f.path("big.bin")
        var generator = SplitMix64(seed: 42)
        let original = (0..<(3 << 20) + 123).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        writeRaw(original, to: path)
        try f.files.encryptFile(atPath: path, owner: bob)
        #expect(bytes(of: path)!.count == encryptedFileLength(owner: bob, chunkSize: 64 * 1024, contentLength: original.count))
        #expect(Array(try f.files.readFile(atPath: path)) == original)
        try f.files.decryptFile(atPath: path)
        #expect(bytes(of: path) == original)
    }

    @Test("encryptFile needs a managed identity: 104")
    func encryptUnmanaged() throws {
        let f = try Fixture()
        let path = f.path("x.txt")
        writeRaw([1, 2, 3], to: path)
        #expect(protectionError { try f.files.encryptFile(atPath: path, owner: carol) }?.code == 104)
        #expect(protectionError { try f.files.encryptFile(atPath: path, owner: .unmanaged) }?.code == 104)
        #expect(protectionError { try IdentityContext.withThreadIdentity(nil) { try f.files.encryptFile(atPath: path) } }?.code
                == (IdentityContext.processIdentity == nil ? 104 : nil) ?? 104)
        #expect(bytes(of: path) == [1, 2, 3])
    }

    @Test("paths: missing, directory, under a regular file", arguments: ["missing.txt", "", "file.txt/child"])
    func badPaths(name: String) throws {
        let f = try Fixture()
        writeRaw([9], to: f.path("file.txt"))
        let path = name.isEmpty ? f.root : f.path(name)
        #expect(protectionError { try f.files.protectionInfo(atPath: path) }?.code == 105)
        #expect(protectionError { try f.files.isFileEncrypted(atPath: path) }?.code == 105)
        #expect(protectionError { try f.files.encryptFile(atPath: path, owner: alice) }?.code == 105)
        #expect(protectionError { try f.files.decryptFile(atPath: path) }?.code == 105)
        #expect(protectionError { try f.files.decryptFile(atPath: path, toPath: f.path("out")) }?.code == 105)
        #expect(protectionError { try f.files.protect(atPath: path, owner: alice) }?.code == 105)
        #expect(protectionError { try f.files.readFile(atPath: path) }?.code == 105)
        #expect(bytes(of: f.path("file.txt")) == [9])
    }

    @Test("writes that the OS refuses (even to root): 106, originals untouched")
    func refusedWrites() throws {
        let f = try Fixture()
        let path = f.path("keep.txt")
        writeRaw(Array("keep".utf8), to: path)
        try f.files.encryptFile(atPath: path, owner: alice)
        let encrypted = bytes(of: path)
        // A destination under a regular file: ENOTDIR, which root cannot bypass.
        #expect(protectionError { try f.files.decryptFile(atPath: path, toPath: path + "/copy") }?.code == 106)
        #expect(protectionError {
            try IdentityContext.withThreadIdentity(alice) {
                try f.files.writeFile(atPath: path + "/new.txt", contents: Data("x".utf8))
            }
        }?.code == 106)
        #expect(protectionError { try f.files.writeFile(atPath: f.path("no/such/dir/x"), contents: Data()) }?.code == 106)
        // A directory where a file is expected.
        #expect(protectionError { try f.files.writeFile(atPath: f.root, contents: Data()) }?.code == 105)
        #expect(protectionError { try f.files.decryptFile(atPath: path, toPath: f.root) }?.code == 105)
        #expect(bytes(of: path) == encrypted)
        #expect(try f.files.readFile(atPath: path) == Data("keep".utf8))
    }

    @Test("a read-only file system refuses in-place encryption: 106 (skipped without one)")
    func readOnlyFileSystem() throws {
        // /proc/self/... lives on procfs; nothing can be created there, not even by root.
        let path = "/proc/self/comm"
        guard FileManager.default.fileExists(atPath: path) else { return }
        let f = try Fixture()
        let error = protectionError { try f.files.encryptFile(atPath: path, owner: alice) }
        #expect(error?.code == 106)
    }

    @Test("missing key for an encrypted file: 103; file untouched")
    func missingKey() throws {
        let f = try Fixture()
        let path = f.path("k.txt")
        writeRaw(Array("k".utf8), to: path)
        try f.files.encryptFile(atPath: path, owner: alice)
        let encrypted = bytes(of: path)
        try f.keys.destroyKeys(for: alice)
        #expect(protectionError { try f.files.decryptFile(atPath: path) }?.code == 103)
        #expect(protectionError { try f.files.readFile(atPath: path) }?.code == 103)
        #expect(protectionError { try f.files.encryptFile(atPath: path, owner: bob) }?.code == 103)
        #expect(bytes(of: path) == encrypted)
        #expect(try f.files.protectionInfo(atPath: path)?.owner == alice)
    }
}
