import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// The key directory and the protection state directory are private to the process's user, however they came
/// to exist.
@Suite("Key and state directories: private (0700), tightened or refused")
struct PrivateDirectoryTests {
    /// A fresh scratch directory, removed by the caller.
    private func scratch() throws -> String {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("idp-private-XXXXXX").path
        var buffer = Array(template.utf8CString)
        guard mkdtemp(&buffer) != nil else { throw ProtectionError.ioFailure(path: template, operation: "mkdtemp", errno: errno) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func permissions(_ path: String) throws -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { throw ProtectionError.ioFailure(path: path, operation: "stat", errno: errno) }
        return info.st_mode & 0o7777
    }

    private func makeDirectory(_ path: String, mode: mode_t) throws {
        guard mkdir(path, 0o700) == 0, chmod(path, mode) == 0 else {
            throw ProtectionError.ioFailure(path: path, operation: "mkdir", errno: errno)
        }
    }

    @Test("a directory the store creates is 0700", arguments: ["keys", "state"])
    func created(kind: String) throws {
        let base = try scratch()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let keys = try FileKeyStore(atPath: base + "/keys/deeper")
        if kind == "state" {
            _ = try FileProtectionManager(
                roots: [base], keyStore: keys, policy: StaticManagedIdentityPolicy(), stateDirectory: base + "/state/deeper")
        }
        #expect(try permissions(base + "/\(kind)/deeper") == 0o700)
    }

    @Test("an existing directory others can read or enter is tightened to 0700, and what it holds still works",
          arguments: [mode_t(0o755), 0o777, 0o750, 0o701, 0o710, 0o1777])
    func tightened(mode: mode_t) throws {
        let base = try scratch()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try makeDirectory(base + "/keys", mode: mode)
        try makeDirectory(base + "/state", mode: mode)
        let keys = try FileKeyStore(atPath: base + "/keys")
        let policy = StaticManagedIdentityPolicy(managed: ["alice@contoso.com"])
        let files = try FileProtectionManager(roots: [base], keyStore: keys, policy: policy, stateDirectory: base + "/state")
        #expect(try permissions(base + "/keys") == 0o700)
        #expect(try permissions(base + "/state") == 0o700)
        let data = DataProtectionManager(keyStore: keys, policy: policy)
        let envelope = try data.protect(Data("secret".utf8), owner: "alice@contoso.com")
        #expect(try IdentityContext.withThreadIdentity("alice@contoso.com") { try data.unprotect(envelope) } == Data("secret".utf8))
        _ = files
    }

    @Test("a private directory stays as it is")
    func untouched() throws {
        let base = try scratch()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try makeDirectory(base + "/keys", mode: 0o700)
        _ = try FileKeyStore(atPath: base + "/keys")
        #expect(try permissions(base + "/keys") == 0o700)
    }

    @Test("a directory of another user is refused with 114 (needs root to make one, as CI runs)")
    func anotherUsersDirectory() throws {
        let base = try scratch()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try makeDirectory(base + "/keys", mode: 0o700)
        try makeDirectory(base + "/state", mode: 0o700)
        guard geteuid() == 0 else {
            // Only root can give a directory away; elsewhere the check above is all this test can do.
            return
        }
        #expect(chown(base + "/keys", 65_534, 65_534) == 0 && chown(base + "/state", 65_534, 65_534) == 0)
        #expect(throws: ProtectionError.self) { try FileKeyStore(atPath: base + "/keys") }
        do {
            _ = try FileKeyStore(atPath: base + "/keys")
        } catch {
            #expect(error.code == 114)
            guard case let .insecureDirectory(path, _) = error else { Issue.record("expected 114, got \(error)"); return }
            #expect(path == base + "/keys")
        }
        let keys = try FileKeyStore(atPath: base + "/own-keys")
        do {
            _ = try FileProtectionManager(roots: [base], keyStore: keys, policy: StaticManagedIdentityPolicy(), stateDirectory: base + "/state")
            Issue.record("a state directory of another user was accepted")
        } catch {
            #expect(error.code == 114)
        }
    }

    @Test("a directory below one that others may write to (no sticky bit) is refused with 114, whatever its own mode",
          arguments: [mode_t(0o777), 0o775, 0o757, 0o770])
    func writableAncestor(mode: mode_t) throws {
        let base = try scratch()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try makeDirectory(base + "/shared", mode: mode)
        try makeDirectory(base + "/shared/keys", mode: 0o700)
        let error = protectionError { try FileKeyStore(atPath: base + "/shared/keys") }
        #expect(error?.code == 114)
        // A directory created below it is refused as well (and so is a state directory).
        #expect(protectionError { try FileKeyStore(atPath: base + "/shared/new/keys") }?.code == 114)
        let keys = try FileKeyStore(atPath: base + "/own-keys")
        #expect(protectionError {
            try FileProtectionManager(roots: [base], keyStore: keys, policy: StaticManagedIdentityPolicy(), stateDirectory: base + "/shared/state")
        }?.code == 114)
        // Through a symbolic link the check follows the directory the link resolves to.
        #expect(symlink(base + "/shared/keys", base + "/link") == 0)
        #expect(protectionError { try FileKeyStore(atPath: base + "/link") }?.code == 114)
    }

    @Test("a sticky, world-writable directory above (as /tmp) is accepted: others cannot rename what they do not own")
    func stickyAncestor() throws {
        let base = try scratch()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try makeDirectory(base + "/tmp", mode: 0o1777)
        _ = try FileKeyStore(atPath: base + "/tmp/keys")
        #expect(try permissions(base + "/tmp/keys") == 0o700)
    }

    @Test("a directory above that belongs to another user is refused with 114 (needs root to make one, as CI runs)")
    func anotherUsersAncestor() throws {
        let base = try scratch()
        defer { try? FileManager.default.removeItem(atPath: base) }
        try makeDirectory(base + "/theirs", mode: 0o755)
        guard geteuid() == 0 else { return }
        #expect(chown(base + "/theirs", 65_534, 65_534) == 0)
        #expect(protectionError { try FileKeyStore(atPath: base + "/theirs/keys") }?.code == 114)
    }
}
