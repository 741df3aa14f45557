import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// Encrypted files of format version 1, written by a build before format version 2 (commit c575fd7^, with
/// `FileProtectionManager.writeFile` and `encryptFile`, chunk size 1,024, owner alice), are committed under
/// `Fixtures/v1` with alice's key file. Every reader still reads them, tampering is still caught, and the
/// first write rewrites them in the current format: an upgrade loses no data.
@Suite("Encrypted files of format version 1")
struct LegacyFormatTests {
    /// The fixture files and the length of their content (byte i is `(i * 31 + 7) % 251`).
    static let files: [(name: String, count: Int)] = [
        ("empty.v1", 0), ("small.v1", 1000), ("exact.v1", 3072), ("multi.v1", 10_000), ("encrypted.v1", 5000),
    ]
    static let chunkSize = 1024
    static let fixtureDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/v1").path

    static func content(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(($0 &* 31 &+ 7) % 251) }
    }

    let f: Fixture

    /// A fresh fixture holding alice's key of the old build and a copy of every v1 file under its root.
    init() throws {
        f = try Fixture()
        let keys = try FileManager.default.contentsOfDirectory(atPath: Self.fixtureDirectory + "/keys")
        for key in keys {
            try FileManager.default.copyItem(atPath: Self.fixtureDirectory + "/keys/" + key, toPath: f.directory + "/keys/" + key)
        }
        for file in Self.files {
            try FileManager.default.copyItem(atPath: Self.fixtureDirectory + "/" + file.name, toPath: f.path(file.name))
        }
    }

    @Test("readFile, protectionInfo and decryptFile read every v1 file", arguments: files)
    func readers(name: String, count: Int) throws {
        let path = f.path(name)
        let expected = Self.content(count)
        let info = try #require(try f.files.protectionInfo(atPath: path))
        #expect(info.owner == alice)
        #expect(info.isEncrypted)
        #expect(info.formatVersion == 1)
        #expect(try f.files.isFileEncrypted(atPath: path))
        #expect(Array(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) }) == expected)
        try IdentityContext.withThreadIdentity(alice) {
            try f.files.decryptFile(atPath: path, toPath: f.path(name + ".plain"))
        }
        #expect(bytes(of: f.path(name + ".plain")) == expected)
        #expect(bytes(of: path) == bytes(of: Self.fixtureDirectory + "/" + name), "a read leaves the file as it is")
    }

    @Test("v1 files go through the policy's access check: another account reads nothing")
    func isolation() throws {
        let files = try FileProtectionManager(
            roots: [f.root], keyStore: f.keys, policy: RefusingPolicy(blocked: []), stateDirectory: f.directory + "/refusing")
        let path = f.path("multi.v1")
        IdentityContext.withThreadIdentity(bob) {
            #expect(throws: RefusingPolicy.refusal) { try files.readFile(atPath: path) }
            #expect(throws: RefusingPolicy.refusal) { try files.openProtectedFile(atPath: path, options: [.read]) }
            #expect(throws: RefusingPolicy.refusal) { try files.openProtectedFile(atPath: path, options: [.read, .write]) }
            #expect(throws: RefusingPolicy.refusal) { try files.decryptFile(atPath: path, toPath: f.path("copy")) }
        }
        #expect(bytes(of: path) == bytes(of: Self.fixtureDirectory + "/multi.v1"), "a refused writable open does not upgrade")
        #expect(Array(try IdentityContext.withThreadIdentity(alice) { try files.readFile(atPath: path) }) == Self.content(10_000))
    }

    @Test("a read-only ProtectedFile reads a v1 file at any offset and leaves it in format 1", arguments: files)
    func protectedFileReads(name: String, count: Int) throws {
        let path = f.path(name)
        let expected = Self.content(count)
        try IdentityContext.withThreadIdentity(alice) {
            let file = try f.files.openProtectedFile(atPath: path, options: [.read])
            defer { try? file.close() }
            #expect(try file.size() == UInt64(count))
            #expect(try file.readToEnd() == expected)
            for offset in stride(from: 0, to: count, by: 333) {
                let piece = try file.read(at: UInt64(offset), upToCount: 700)
                #expect(piece == Array(expected[offset..<min(count, offset + 700)]))
            }
            #expect(try file.read(at: UInt64(count), upToCount: 10).isEmpty)
        }
        #expect(try f.files.protectionInfo(atPath: path)?.formatVersion == 1)
    }

    @Test("a writable ProtectedFile rewrites a v1 file in format 2 first, keeping its content", arguments: files)
    func protectedFileUpgrades(name: String, count: Int) throws {
        let path = f.path(name)
        var expected = Self.content(count)
        try IdentityContext.withThreadIdentity(alice) {
            let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write])
            defer { try? file.close() }
            #expect(try file.readToEnd() == expected)
            try file.write([1, 2, 3], at: UInt64(count / 2))
            try file.synchronize()
        }
        let at = count / 2
        let end = max(count, at + 3)
        if expected.count < end { expected += [UInt8](repeating: 0, count: end - expected.count) }
        expected.replaceSubrange(at..<at + 3, with: [1, 2, 3])
        let info = try #require(try f.files.protectionInfo(atPath: path))
        #expect(info.formatVersion == 2)
        #expect(info.owner == alice)
        #expect(Array(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) }) == expected)
    }

    @Test("encryptFile rewrites a v1 file of the same owner in format 2; writeFile replaces it in format 2")
    func encryptFileUpgrades() throws {
        let path = f.path("multi.v1")
        try f.files.encryptFile(atPath: path, owner: alice)
        #expect(try f.files.protectionInfo(atPath: path)?.formatVersion == 2)
        #expect(Array(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) }) == Self.content(10_000))

        let other = f.path("small.v1")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: other, contents: Data([9, 9])) }
        #expect(try f.files.protectionInfo(atPath: other)?.formatVersion == 2)
        #expect(Array(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: other) }) == [9, 9])
    }

    @Test("a wipe of the owner removes v1 files too")
    func wipe() throws {
        let removed = try f.files.removeFiles(ownedBy: alice)
        #expect(removed.count == Self.files.count)
        for file in Self.files {
            #expect(!FileManager.default.fileExists(atPath: f.path(file.name)))
        }
    }

    // MARK: Tampering

    var headerLength: Int { 8 + 4 + alice.name.utf8.count + 16 + 32 + 4 }
    var recordLength: Int { Self.chunkSize + 16 }

    /// Puts `damaged` at the path of multi.v1 and checks that every reader refuses it with one of `codes`,
    /// leaving it as it is.
    private func expectRejected(_ damaged: [UInt8], codes: Set<Int>, _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        let path = f.path("multi.v1")
        writeRaw(damaged, to: path)
        let errors = IdentityContext.withThreadIdentity(alice) {
            [
                protectionError(sourceLocation: sourceLocation) { try f.files.readFile(atPath: path) },
                protectionError(sourceLocation: sourceLocation) { try f.files.decryptFile(atPath: path, toPath: f.path("copy")) },
                protectionError(sourceLocation: sourceLocation) {
                    let file = try f.files.openProtectedFile(atPath: path, options: [.read])
                    defer { try? file.close() }
                    return try file.readToEnd()
                },
                protectionError(sourceLocation: sourceLocation) {
                    let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write])
                    defer { try? file.close() }
                    return try file.readToEnd()
                },
            ]
        }
        for error in errors {
            #expect(error.map { codes.contains($0.code) } == true, "\(String(describing: error)) \(comment.rawValue)", sourceLocation: sourceLocation)
        }
        #expect(bytes(of: path) == damaged, sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: f.path("copy")), sourceLocation: sourceLocation)
    }

    @Test("a flipped byte, a dropped, swapped or repeated chunk and a cut file are refused; never wrong plaintext")
    func tampering() throws {
        let original = try #require(bytes(of: Self.fixtureDirectory + "/multi.v1"))
        #expect(original.count == headerLength + 9 * recordLength + 784 + 16)
        let records = (0..<10).map { index in
            Array(original[headerLength + index * recordLength..<min(original.count, headerLength + (index + 1) * recordLength)])
        }
        let header = Array(original[..<headerLength])
        for position in [headerLength + 5, headerLength + 3 * recordLength + 100, original.count - 1, headerLength - 10] {
            var damaged = original
            damaged[position] ^= 0x40
            expectRejected(damaged, codes: [102], "byte \(position) flipped")
        }
        expectRejected(header + records[0..<9].joined(), codes: [102], "final chunk dropped at a record boundary")
        expectRejected(header + records[1] + records[0] + records[2...].joined(), codes: [102], "chunks 0 and 1 swapped")
        expectRejected(header + Array(records.joined()) + records[9], codes: [102], "final chunk repeated")
        expectRejected(Array(original[..<(original.count - 5)]), codes: [100, 102], "cut inside the final tag")
        expectRejected(Array(original[..<(headerLength + 9 * recordLength + 7)]), codes: [100], "cut to fewer bytes than a tag")
        expectRejected(header, codes: [100], "only the header")
        var version = original
        version[8] = 3
        expectRejected(version, codes: [101], "an unknown version")
    }
}
