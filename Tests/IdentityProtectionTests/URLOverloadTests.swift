import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// The `URL` forms of the file APIs (`at:` / `to:`) do what the `atPath:` / `toPath:` forms do with the URL's
/// path, and refuse a URL that is not a file URL with a typed error.
@Suite("URL overloads")
struct URLOverloadTests {
    func url(_ fixture: Fixture, _ name: String) -> URL {
        URL(fileURLWithPath: fixture.path(name))
    }

    @Test("writeFile(at:) / readFile(at:) / protectionInfo(at:) / isFileEncrypted(at:) are the path forms")
    func readWrite() throws {
        let fixture = try Fixture()
        let file = url(fixture, "report.txt")
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.writeFile(at: file, contents: Data("q3".utf8))
            #expect(try fixture.files.readFile(at: file) == Data("q3".utf8))
        }
        #expect(try fixture.files.protectionInfo(at: file)?.owner == alice)
        #expect(try fixture.files.protectionInfo(atPath: fixture.path("report.txt"))?.owner == alice)
        #expect(try fixture.files.isFileEncrypted(at: file))
    }

    @Test("a percent-encoded file URL names the decoded path")
    func percentEncoding() throws {
        let fixture = try Fixture()
        let name = "a report #1.txt"
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.writeFile(at: url(fixture, name), contents: Data("x".utf8))
        }
        #expect(url(fixture, name).absoluteString.contains("%20"))
        #expect(try fixture.files.protectionInfo(atPath: fixture.path(name))?.owner == alice)
    }

    @Test("protect(at:owner:), encryptFile(at:owner:), decryptFile(at:) and decryptFile(at:to:)")
    func ownersAndEncryption() throws {
        let fixture = try Fixture(isolated: false)
        let file = url(fixture, "plain.txt")
        writeRaw(Array("hello".utf8), to: fixture.path("plain.txt"))
        try fixture.files.protect(at: file, owner: carol)
        #expect(try fixture.files.protectionInfo(at: file)?.owner == carol)
        #expect(try !fixture.files.isFileEncrypted(at: file))
        try fixture.files.encryptFile(at: file, owner: alice)
        #expect(try fixture.files.isFileEncrypted(at: file))
        let copy = url(fixture, "copy.txt")
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.decryptFile(at: file, to: copy)
            try fixture.files.decryptFile(at: file)
        }
        #expect(bytes(of: fixture.path("copy.txt")) == Array("hello".utf8))
        #expect(bytes(of: fixture.path("plain.txt")) == Array("hello".utf8))
        #expect(try fixture.files.protectionInfo(at: copy)?.owner == alice)
    }

    @Test("protectDirectory(at:owner:) and ownerOfDirectory(at:), with or without a trailing slash")
    func directories() throws {
        let fixture = try Fixture()
        let directory = url(fixture, "inbox")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try fixture.files.protectDirectory(at: directory, owner: bob)
        #expect(try fixture.files.ownerOfDirectory(at: directory) == bob)
        #expect(try fixture.files.ownerOfDirectory(atPath: fixture.path("inbox")) == bob)
        let slashed = URL(fileURLWithPath: fixture.path("inbox"), isDirectory: true)
        #expect(slashed.absoluteString.hasSuffix("/inbox/"))
        #expect(try fixture.files.ownerOfDirectory(at: slashed) == bob)
    }

    @Test("a relative file URL resolves against its base; file://localhost/ is this host")
    func relativeAndLocalhost() throws {
        let fixture = try Fixture()
        let relative = URL(fileURLWithPath: "notes.txt", relativeTo: URL(fileURLWithPath: fixture.root, isDirectory: true))
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.writeFile(at: relative, contents: Data("n".utf8))
        }
        #expect(try fixture.files.protectionInfo(atPath: fixture.path("notes.txt"))?.owner == alice)
        let localhost = URL(string: "file://localhost" + fixture.path("notes.txt"))!
        #expect(try fixture.files.protectionInfo(at: localhost)?.owner == alice)
    }

    @Test("openFile(at:), openProtectedFile(at:) and ProtectedFile(at:)")
    func handles() throws {
        let fixture = try Fixture()
        let clear = url(fixture, "clear.log")
        let handle = try IdentityContext.withThreadIdentity(carol) {
            try fixture.files.openFile(at: clear, options: [.write, .create])
        }
        try handle.write(contentsOf: Data("line".utf8))
        try handle.close()
        #expect(try fixture.files.protectionInfo(at: clear)?.owner == carol)

        let secret = url(fixture, "secret.bin")
        let file = try fixture.files.openProtectedFile(at: secret, options: [.read, .write, .create], owner: alice)
        try file.write(Array("abc".utf8))
        try file.close()
        #expect(try fixture.files.isFileEncrypted(at: secret))
        let again = try IdentityContext.withThreadIdentity(alice) {
            try ProtectedFile(at: secret, options: [.read], manager: fixture.files)
        }
        #expect(try again.readToEnd() == Array("abc".utf8))
        #expect(again.path == fixture.path("secret.bin"))
        try again.close()
    }

    @Test("protect(at:to:owner:) and unprotect(at:to:) round-trip a stream file")
    func streams() throws {
        let fixture = try Fixture()
        writeRaw(Array(repeating: 7, count: 100_000), to: fixture.path("in.bin"))
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.protect(at: url(fixture, "in.bin"), to: url(fixture, "out.idps"), owner: alice, chunkSize: 4096)
            try fixture.files.unprotect(at: url(fixture, "out.idps"), to: url(fixture, "back.bin"))
        }
        #expect(bytes(of: fixture.path("back.bin")) == Array(repeating: 7, count: 100_000))
        #expect(try fixture.files.protectionInfo(at: url(fixture, "out.idps"))?.owner == alice)
    }

    @Test("init(roots:keyStore:policy:stateDirectory:) with URLs, addRoot(URL) and FileKeyStore(at:)")
    func initializers() throws {
        let fixture = try Fixture()
        let base = URL(fileURLWithPath: fixture.directory)
        let keys = try FileKeyStore(at: base.appendingPathComponent("keys-url"))
        #expect(keys.directory.hasSuffix("/keys-url"))
        let files = try FileProtectionManager(
            roots: [base.appendingPathComponent("root")], keyStore: keys, policy: fixture.policy,
            stateDirectory: base.appendingPathComponent("state-url"))
        #expect(files.roots == [fixture.root])
        try files.addRoot(base.appendingPathComponent("more"))
        #expect(files.roots == [fixture.root, fixture.directory + "/more"])
    }

    @Test("the async namespace takes URLs too")
    func asyncForms() async throws {
        let fixture = try Fixture()
        let files = fixture.files.async
        let file = url(fixture, "async.txt")
        try await IdentityContext.withThreadIdentity(alice) {
            try await files.writeFile(at: file, contents: Data("async".utf8))
            #expect(try await files.readFile(at: file) == Data("async".utf8))
            try await files.decryptFile(at: file, to: url(fixture, "async-copy.txt"))
            try await files.decryptFile(at: file)
            try await files.encryptFile(at: file, owner: alice)
            try await files.protect(at: file, owner: bob)
            let handle = try await files.openProtectedFile(at: url(fixture, "async.bin"), options: [.write, .create], owner: alice)
            try handle.close()
            try await files.protect(at: url(fixture, "async-copy.txt"), to: url(fixture, "async.idps"), owner: alice)
            try await files.unprotect(at: url(fixture, "async.idps"), to: url(fixture, "async-back.txt"))
        }
        #expect(try fixture.files.protectionInfo(at: file)?.owner == bob)
        #expect(bytes(of: fixture.path("async-back.txt")) == Array("async".utf8))
        #expect(try fixture.files.isFileEncrypted(at: url(fixture, "async.bin")))
    }

    static let remote = URL(string: "https://example.com/documents/q3.txt")!

    /// Every URL form, called with a URL that is not a file URL (as the source, and where there is one, as the
    /// destination too).
    static let operations: [(String, @Sendable (FileProtectionManager, URL) throws -> Void)] = [
        ("protect(at:owner:)", { try $0.protect(at: $1, owner: alice) }),
        ("protectionInfo(at:)", { _ = try $0.protectionInfo(at: $1) }),
        ("isFileEncrypted(at:)", { _ = try $0.isFileEncrypted(at: $1) }),
        ("encryptFile(at:owner:)", { try $0.encryptFile(at: $1, owner: alice) }),
        ("decryptFile(at:)", { try $0.decryptFile(at: $1) }),
        ("decryptFile(at:to:)", { try $0.decryptFile(at: $1, to: $1) }),
        ("protectDirectory(at:owner:)", { try $0.protectDirectory(at: $1, owner: alice) }),
        ("ownerOfDirectory(at:)", { _ = try $0.ownerOfDirectory(at: $1) }),
        ("writeFile(at:contents:)", { try $0.writeFile(at: $1, contents: Data("x".utf8)) }),
        ("readFile(at:)", { _ = try $0.readFile(at: $1) }),
        ("openFile(at:options:)", { _ = try $0.openFile(at: $1, options: [.write, .create]) }),
        ("openProtectedFile(at:options:)", { _ = try $0.openProtectedFile(at: $1, options: [.write, .create]) }),
        ("ProtectedFile(at:manager:)", { _ = try ProtectedFile(at: $1, options: [.write, .create], manager: $0) }),
        ("protect(at:to:owner:)", { try $0.protect(at: $1, to: $1, owner: alice) }),
        ("unprotect(at:to:)", { try $0.unprotect(at: $1, to: $1) }),
        ("addRoot(_:)", { try $0.addRoot($1) }),
        ("FileKeyStore(at:)", { _ = try FileKeyStore(at: $1) }),
    ]

    @Test("a URL that is not a file URL is ProtectionError.fileNotFound (105), and nothing is written",
          arguments: operations.indices)
    func nonFileURL(index: Int) throws {
        let (name, operation) = Self.operations[index]
        let fixture = try Fixture()
        let before = try FileManager.default.subpathsOfDirectory(atPath: fixture.directory).sorted()
        let targets = [
            Self.remote, URL(string: "data:text/plain,hello")!, URL(string: "relative/q3.txt")!,
            URL(string: "file://fileserver/share/q3.txt")!,
        ]
        for target in targets {
            let error = protectionError { try IdentityContext.withThreadIdentity(alice) { try operation(fixture.files, target) } }
            #expect(error == .fileNotFound(path: target.absoluteString), "\(name) with \(target)")
            #expect(error?.code == 105)
        }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: fixture.directory).sorted() == before, "\(name)")
        #expect(fixture.files.roots == [fixture.root])
    }

    @Test("a NUL in a file URL's path is refused, nothing is written; credentials never reach the error", arguments: operations.indices)
    func nulAndCredentials(index: Int) throws {
        let (name, operation) = Self.operations[index]
        let fixture = try Fixture()
        let before = try FileManager.default.subpathsOfDirectory(atPath: fixture.directory).sorted()
        let nul = URL(string: "file://" + fixture.path("a") + "%00b")!
        let error = protectionError { try IdentityContext.withThreadIdentity(alice) { try operation(fixture.files, nul) } }
        #expect(error == .fileNotFound(path: nul.absoluteString), "\(name)")
        let secret = URL(string: "file://user:secret@fileserver/share/q3.txt")!
        let refused = protectionError { try IdentityContext.withThreadIdentity(alice) { try operation(fixture.files, secret) } }
        #expect(refused?.code == 105, "\(name)")
        #expect(refused.map { !"\($0)".contains("secret") && !"\($0)".contains("user") } == true, "\(name)")
        #expect(try FileManager.default.subpathsOfDirectory(atPath: fixture.directory).sorted() == before, "\(name)")
    }

    @Test("a file URL as destination with a remote source, and the reverse, are refused before anything is read")
    func mixedURLs() throws {
        let fixture = try Fixture()
        writeRaw(Array("hello".utf8), to: fixture.path("in.txt"))
        let local = url(fixture, "in.txt")
        let error = protectionError { try fixture.files.protect(at: local, to: Self.remote, owner: alice) }
        #expect(error == .fileNotFound(path: Self.remote.absoluteString))
        let reverse = protectionError { try fixture.files.decryptFile(at: Self.remote, to: url(fixture, "out.txt")) }
        #expect(reverse == .fileNotFound(path: Self.remote.absoluteString))
        #expect(!FileManager.default.fileExists(atPath: fixture.path("out.txt")))
    }

    @Test("the async namespace refuses a URL that is not a file URL as well")
    func asyncNonFileURL() async throws {
        let fixture = try Fixture()
        let files = fixture.files.async
        await #expect(throws: ProtectionError.fileNotFound(path: Self.remote.absoluteString)) {
            try await files.writeFile(at: Self.remote, contents: Data())
        }
        await #expect(throws: ProtectionError.fileNotFound(path: Self.remote.absoluteString)) {
            _ = try await files.readFile(at: Self.remote)
        }
        await #expect(throws: ProtectionError.fileNotFound(path: Self.remote.absoluteString)) {
            _ = try await files.openProtectedFile(at: Self.remote, options: [.write, .create], owner: alice)
        }
        await #expect(throws: ProtectionError.fileNotFound(path: Self.remote.absoluteString)) {
            try await files.unprotect(at: Self.remote, to: url(fixture, "x"))
        }
    }
}
