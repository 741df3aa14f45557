import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// Each deprecated name forwards to its replacement. The tests are themselves marked deprecated: calling a
/// deprecated name from a deprecated declaration is expected and warns nothing.
@Suite("Deprecated names forward to the current ones")
struct DeprecatedNamesTests {
    @Test("FileProtectionManager: path:, directory:, fileAtPath:, identity: and for: forms")
    @available(*, deprecated, message: "calls the deprecated names on purpose")
    func fileProtectionManager() throws {
        let fixture = try Fixture()
        let files = fixture.files
        writeRaw(Array("hello".utf8), to: fixture.path("f.txt"))
        try files.protect(path: fixture.path("f.txt"), identity: carol)
        #expect(try files.protectionInfo(path: fixture.path("f.txt"))?.owner == carol)
        #expect(try !files.isFileEncrypted(path: fixture.path("f.txt")))
        try files.encryptFile(path: fixture.path("f.txt"), for: alice)
        #expect(try files.isFileEncrypted(atPath: fixture.path("f.txt")))
        try IdentityContext.withThreadIdentity(alice) {
            try files.decryptFile(path: fixture.path("f.txt"), toCopyPath: fixture.path("copy.txt"))
            try files.decryptFile(path: fixture.path("f.txt"))
            try files.protect(fileAtPath: fixture.path("f.txt"), toPath: fixture.path("f.idps"), identity: alice, chunkSize: 16)
            try files.unprotect(fileAtPath: fixture.path("f.idps"), toPath: fixture.path("back.txt"))
        }
        #expect(try !files.isFileEncrypted(atPath: fixture.path("f.txt")))
        #expect(bytes(of: fixture.path("copy.txt")) == Array("hello".utf8))
        #expect(bytes(of: fixture.path("back.txt")) == Array("hello".utf8))
        #expect(try files.protectionInfo(atPath: fixture.path("f.idps"))?.owner == alice)

        try FileManager.default.createDirectory(atPath: fixture.path("inbox"), withIntermediateDirectories: true)
        try files.protect(directory: fixture.path("inbox"), identity: bob)
        #expect(try files.owner(ofDirectory: fixture.path("inbox")) == bob)
        #expect(try files.ownerOfDirectory(atPath: fixture.path("inbox")) == bob)
    }

    @Test("FileProtectionManager.async: path:, fileAtPath:, identity: and for: forms")
    @available(*, deprecated, message: "calls the deprecated names on purpose")
    func asyncFileOperations() async throws {
        let fixture = try Fixture()
        let files = fixture.files.async
        writeRaw(Array("hello".utf8), to: fixture.path("f.txt"))
        try await files.protect(path: fixture.path("f.txt"), identity: carol)
        #expect(try fixture.files.protectionInfo(atPath: fixture.path("f.txt"))?.owner == carol)
        try await files.encryptFile(path: fixture.path("f.txt"), for: alice)
        #expect(try fixture.files.isFileEncrypted(atPath: fixture.path("f.txt")))
        try await IdentityContext.withThreadIdentity(alice) {
            try await files.decryptFile(path: fixture.path("f.txt"), toCopyPath: fixture.path("copy.txt"))
            try await files.decryptFile(path: fixture.path("f.txt"))
            try await files.protect(fileAtPath: fixture.path("f.txt"), toPath: fixture.path("f.idps"), identity: alice)
            try await files.unprotect(fileAtPath: fixture.path("f.idps"), toPath: fixture.path("back.txt"))
        }
        #expect(try !fixture.files.isFileEncrypted(atPath: fixture.path("f.txt")))
        #expect(bytes(of: fixture.path("copy.txt")) == Array("hello".utf8))
        #expect(bytes(of: fixture.path("back.txt")) == Array("hello".utf8))
    }

    @Test("DataProtectionManager: identity: forms, sync and async")
    @available(*, deprecated, message: "calls the deprecated names on purpose")
    func dataProtectionManager() async throws {
        let fixture = try Fixture()
        let data = fixture.data
        #expect(try data.protectionInfo(data.protect(Data("x".utf8), identity: alice))?.owner == alice)
        #expect(try data.protectionInfo(data.protect("x", identity: carol))?.owner == carol)
        #expect(try await data.protectionInfo(data.async.protect(Data("x".utf8), identity: bob))?.owner == bob)
        #expect(try await data.protectionInfo(data.async.protect("x", identity: alice))?.owner == alice)
        let pieces = AsyncStream<[UInt8]> { continuation in
            continuation.yield(Array("stream".utf8))
            continuation.finish()
        }
        let sealed = try await data.protect(pieces, identity: alice, chunkSize: 4).collect()
        let asyncSealed = try await data.async.protect(AsyncStream<[UInt8]> { $0.finish() }, identity: bob).collect()
        for (envelope, plaintext) in [(sealed, Array("stream".utf8)), (asyncSealed, [])] {
            #expect(envelope != plaintext)
            let opened = try await data.unprotect(AsyncStream<[UInt8]> { $0.yield(envelope); $0.finish() }).collect()
            #expect(opened == plaintext)
        }
    }

    @Test("FileKeyStore(directory:)")
    @available(*, deprecated, message: "calls the deprecated names on purpose")
    func fileKeyStore() throws {
        let fixture = try Fixture()
        let store = try FileKeyStore(directory: fixture.directory + "/old-keys")
        #expect(store.directory.hasSuffix("/old-keys"))
    }
}
