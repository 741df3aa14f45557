import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// Manages alice, bob and mallory with file encryption; refuses creating data for `blocked`, and reading
/// another account's data (a cross-tenant or blocked reader), the way the policy module's blocked accounts and
/// tenant isolation do.
final class RefusingPolicy: ManagedIdentityPolicy {
    static let refusal = ProtectionError.ioFailure(path: "", operation: "policy refusal", errno: EACCES)
    let base = StaticManagedIdentityPolicy(managed: [alice, bob, mallory], fileEncryptionRequired: true)
    let blocked: Set<Identity>

    init(blocked: Set<Identity>) {
        self.blocked = blocked
    }

    func isManaged(_ identity: Identity) -> Bool { base.isManaged(identity) }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { base.isFileEncryptionRequired(for: identity) }

    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        switch access {
        case .create:
            return blocked.contains(owner) ? Self.refusal : nil
        case let .read(reader), let .modify(writer: reader):
            return blocked.contains(owner) || reader != owner ? Self.refusal : nil
        case let .transfer(recipient):
            return blocked.contains(owner) || recipient != owner ? Self.refusal : nil
        }
    }
}

@Suite("Every new read and create path goes through the policy's access check")
struct AccessCheckTests {
    let f: Fixture
    let files: FileProtectionManager
    let data: DataProtectionManager

    init() throws {
        f = try Fixture(chunkSize: 16)
        let policy = RefusingPolicy(blocked: [mallory])
        files = try FileProtectionManager(
            roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state", chunkSize: 16)
        data = DataProtectionManager(keyStore: f.keys, policy: policy)
    }

    private func expectRefused<R>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R) {
        #expect(protectionError(sourceLocation: sourceLocation, body) == RefusingPolicy.refusal, sourceLocation: sourceLocation)
    }

    @Test("ProtectedFile: no create for a blocked owner (nothing created), no open by another reader")
    func protectedFile() throws {
        let path = f.path("p.bin")
        expectRefused { try files.openProtectedFile(atPath: path, options: [.write, .create], owner: mallory) }
        expectRefused { try IdentityContext.withThreadIdentity(mallory) { try files.openProtectedFile(atPath: path, options: [.write, .create]) } }
        #expect(!FileManager.default.fileExists(atPath: path))
        try IdentityContext.withThreadIdentity(alice) {
            let file = try files.openProtectedFile(atPath: path, options: [.write, .create])
            try file.write(Array("alice only".utf8))
            try file.close()
        }
        for reader in [bob, carol, mallory] {
            expectRefused { try IdentityContext.withThreadIdentity(reader) { try files.openProtectedFile(atPath: path, options: [.read]) } }
            expectRefused { try IdentityContext.withThreadIdentity(reader) { try files.openProtectedFile(atPath: path, options: [.read, .write]) } }
        }
        // Truncating alice's file for a blocked owner is refused before anything is cut.
        expectRefused { try files.openProtectedFile(atPath: path, options: [.write, .truncate], owner: mallory) }
        let back = try IdentityContext.withThreadIdentity(alice) { try files.openProtectedFile(atPath: path, options: [.read]).readToEnd() }
        #expect(back == Array("alice only".utf8))
        // A plain file owned by a blocked account is not handed out either.
        let plain = f.path("plain.txt")
        writeRaw(Array("m".utf8), to: plain)
        try f.files.protect(atPath: plain, owner: carol)
        expectRefused { try IdentityContext.withThreadIdentity(bob) { try files.openProtectedFile(atPath: plain, options: [.read]) } }
    }

    @Test("openFile: refusals come before the encryption rule")
    func openFile() throws {
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: f.path("a"), contents: Data("x".utf8)) }
        expectRefused { try IdentityContext.withThreadIdentity(bob) { try files.openFile(atPath: f.path("a"), options: [.read]) } }
        expectRefused { try IdentityContext.withThreadIdentity(mallory) { try files.openFile(atPath: f.path("m"), options: [.write, .create]) } }
    }

    @Test("directory owners: no owner for a blocked account; files created inside a blocked account's directory refused")
    func directories() throws {
        let directory = f.path("shared")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        expectRefused { try files.protectDirectory(atPath: directory, owner: mallory) }
        #expect(try files.ownerOfDirectory(atPath: directory) == nil)
        try f.files.protectDirectory(atPath: directory, owner: mallory)   // set through a permissive manager
        let inside = directory + "/new.txt"
        // No thread identity (and no process identity in these tests): the directory's owner applies.
        IdentityContext.withThreadIdentity(nil) {
            expectRefused { try files.writeFile(atPath: inside, contents: Data("x".utf8)) }
            expectRefused { try files.openProtectedFile(atPath: inside, options: [.write, .create]) }
            expectRefused { try files.openFile(atPath: inside, options: [.write, .create]) }
        }
        #expect(!FileManager.default.fileExists(atPath: inside))
    }

    @Test("streamed protect/unprotect: no stream for a blocked owner, no plaintext for another reader")
    func streams() async throws {
        let chunks = [Array("part one ".utf8), Array("part two".utf8)]
        #expect(throws: RefusingPolicy.refusal) { try data.protect(chunks.async, owner: mallory) }
        let sealed = try await IdentityContext.withThreadIdentity(alice) {
            try await data.protect(chunks.async, owner: alice).collect()
        }
        for reader in [bob, carol] {
            await #expect(throws: RefusingPolicy.refusal) {
                try await IdentityContext.withThreadIdentity(reader) {
                    _ = try await data.unprotect([sealed].async).collect()
                }
            }
        }
        let opened = try await IdentityContext.withThreadIdentity(alice) { try await data.unprotect([sealed].async).collect() }
        #expect(opened == chunks.joined().map { $0 })
    }

    @Test("file-to-file streamed forms: refused without writing the destination")
    func fileForms() throws {
        let source = f.path("src.bin")
        let sealed = f.path("sealed.bin")
        let opened = f.path("opened.bin")
        writeRaw(Array(repeating: 5, count: 100), to: source)
        expectRefused { try files.protect(atPath: source, toPath: sealed, owner: mallory) }
        #expect(!FileManager.default.fileExists(atPath: sealed))
        try IdentityContext.withThreadIdentity(alice) { try files.protect(atPath: source, toPath: sealed, owner: alice) }
        expectRefused { try IdentityContext.withThreadIdentity(bob) { try files.unprotect(atPath: sealed, toPath: opened) } }
        #expect(!FileManager.default.fileExists(atPath: opened))
        try IdentityContext.withThreadIdentity(alice) { try files.unprotect(atPath: sealed, toPath: opened) }
        #expect(bytes(of: opened) == Array(repeating: 5, count: 100))
    }
}

