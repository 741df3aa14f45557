import Foundation
@testable import IdentityPolicy
@testable import IdentityProtection
import IdentityRuntime
import Testing

/// A fault the wipe's walk meets at one path: running as root, the tests cannot make the file system refuse,
/// so the protected roots' test seam makes the walk meet the refusal (EACCES, as an unreadable directory or
/// an immutable file would give).
private func refuse(_ operation: String, at target: String) -> @Sendable (String, String) -> ProtectionError? {
    { op, path in
        op == operation && path == target ? .ioFailure(path: path, operation: operation, errno: EACCES) : nil
    }
}

@Suite("Wipes reach everything: what a wipe cannot remove is reported, and it is never a success")
struct WipeLeftoverTests {
    @Test("a directory the walk cannot read: the rest is wiped, the directory is a leftover, the wipe is not complete")
    func unreadableDirectory() async throws {
        let f = try WipeFixture()
        try FileManager.default.createDirectory(atPath: f.root + "/locked", withIntermediateDirectories: true)
        try f.write("a1.txt", as: alice, "alice one")
        try f.write("locked/a2.txt", as: alice, "alice two")
        try f.write("b1.txt", as: bob, "bob one")
        f.files.storage.injectFaults(refuse("list", at: f.root + "/locked"))

        let report = await f.manager.wipeData(forAccount: alice)
        #expect(!report.isComplete)
        #expect(report.error?.code == 106)
        #expect(report.leftovers.map(\.path) == [f.root + "/locked"])
        #expect(report.leftovers.first?.error == .ioFailure(path: f.root + "/locked", operation: "list", errno: EACCES))
        #expect(report.removedFiles == [f.root + "/a1.txt"])
        #expect(FileManager.default.fileExists(atPath: f.root + "/locked/a2.txt"))
        #expect(FileManager.default.fileExists(atPath: f.root + "/b1.txt"))

        // The account stayed in the journal: once the fault is gone, the next start finishes the wipe.
        f.files.storage.injectFaults(nil)
        let restarted = try FileProtectionManager(
            roots: [f.root], keyStore: f.keys, policy: f.files.policy, stateDirectory: f.directory.file("state"))
        #expect(!FileManager.default.fileExists(atPath: f.root + "/locked/a2.txt"))
        #expect(FileManager.default.fileExists(atPath: f.root + "/b1.txt"))
        #expect(try restarted.ownersUnderRoots() == [bob])
    }

    @Test("a file the wipe cannot remove is a leftover of its owner; the next wipe of the account removes it")
    func fileThatCannotBeRemoved() async throws {
        let f = try WipeFixture()
        try f.write("a1.txt", as: alice, "alice one")
        try f.write("nested/a2.txt", as: alice, "alice two")
        f.files.storage.injectFaults(refuse("unlink", at: f.root + "/nested/a2.txt"))

        let report = await f.manager.wipeData(forAccount: alice)
        #expect(!report.isComplete)
        #expect(report.leftovers == [WipeLeftover(
            path: f.root + "/nested/a2.txt", owner: alice,
            error: .ioFailure(path: f.root + "/nested/a2.txt", operation: "unlink", errno: EACCES))])
        #expect(report.removedFiles == [f.root + "/a1.txt"])

        f.files.storage.injectFaults(nil)
        let again = await f.manager.wipeData(forAccount: alice)
        #expect(again.isComplete)
        #expect(again.removedFiles == [f.root + "/nested/a2.txt"])
    }

    @Test("a tenant wipe that meets a directory it cannot read wipes every owner it found and reports the rest")
    func tenantWipeWithUnreadableDirectory() async throws {
        let f = try WipeFixture()
        let stranger: Identity = "zoe@contoso.com"   // never registered: only an owner of files
        let hidden: Identity = "yan@contoso.com"     // only an owner of a file in the unreadable directory
        try FileManager.default.createDirectory(atPath: f.root + "/locked", withIntermediateDirectories: true)
        try f.write("z.txt", as: stranger, "zoe's")
        try f.write("locked/y.txt", as: hidden, "yan's")
        try f.write("d.txt", as: dave, "dave's")
        f.files.storage.injectFaults(refuse("list", at: f.root + "/locked"))

        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(!report.isComplete)
        #expect(report.error?.code == 106)
        #expect(report.leftovers.map(\.path) == [f.root + "/locked"])
        #expect(report.accounts.map(\.account).contains(stranger))
        #expect(!FileManager.default.fileExists(atPath: f.root + "/z.txt"))
        #expect(FileManager.default.fileExists(atPath: f.root + "/d.txt"))

        // Readable again: the next tenant wipe finds the hidden owner and completes.
        f.files.storage.injectFaults(nil)
        let again = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(again.isComplete)
        #expect(again.accounts.contains { $0.account == hidden && $0.removedFiles == [f.root + "/locked/y.txt"] })
    }

    @Test("an open ProtectedFile is refused after wipeData, and stays refused after unblocking and a new key")
    func handleStaysDeadAfterUnblockAndRekey() async throws {
        let f = try WipeFixture()
        let path = f.root + "/ledger.bin"
        let handle = try IdentityContext.withThreadIdentity(alice) { () throws -> ProtectedFile in
            let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create])
            try file.write(Array("alice's secret".utf8))
            return file
        }
        #expect(try handle.read(at: 0, upToCount: 100) == Array("alice's secret".utf8))

        let report = await f.manager.wipeData(forAccount: alice)
        #expect(report.isComplete)
        func expectDead(sourceLocation: SourceLocation = #_sourceLocation) {
            let operations: [() throws -> Void] = [
                { _ = try handle.read(at: 0, upToCount: 100) }, { _ = try handle.readToEnd() },
                { try handle.write(Array("more".utf8), at: 0) }, { _ = try handle.size() }, { try handle.truncate(to: 0) },
            ]
            for operation in operations {
                do {
                    try operation()
                    Issue.record("a wiped handle answered", sourceLocation: sourceLocation)
                } catch let error as ProtectionError {
                    #expect(error.code == 103, sourceLocation: sourceLocation)
                } catch {
                    Issue.record("\(error)", sourceLocation: sourceLocation)
                }
            }
        }
        expectDead()
        // The account comes back: unblocked, a new key, a new file under the same name.
        f.manager.unblockAccount(alice)
        _ = try f.keys.currentKey(for: alice)
        try f.write("ledger.bin", as: alice, "alice's new data")
        expectDead()
        // A handle opened now works.
        let fresh = try IdentityContext.withThreadIdentity(alice) { try f.files.openProtectedFile(atPath: path, options: [.read]) }
        #expect(try fresh.readToEnd() == Array("alice's new data".utf8))
    }
}

/// The file manager's key store over a `FileKeyStore`, whose keys of one account cannot be destroyed.
private final class StubbornKeyStore: KeyStore {
    let inner: FileKeyStore
    let stubborn: Identity

    init(_ inner: FileKeyStore, stubborn: Identity) {
        self.inner = inner
        self.stubborn = stubborn
    }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.currentKey(for: identity) }
    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.key(withID: id, for: identity)
    }
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        if identity == stubborn { throw .keyStoreUnavailable(reason: "keys of \(identity.name) cannot be destroyed") }
        try inner.destroyKeys(for: identity)
    }
}

@Suite("Wipes reach everything: a failure without a path is every account's")
struct WipeKeyFailureTests {
    @Test("keys the file manager's store cannot destroy fail the wipe of every account, also beside another account's leftover")
    func keyFailureBesideLeftover() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let keys = StubbornKeyStore(try FileKeyStore(atPath: directory.file("keys")), stubborn: alice)
        let policy = StaticManagedIdentityPolicy(managed: [alice, bob], fileEncryptionRequired: true, dataIsolation: false)
        let files = try FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: directory.file("state"))
        let manager = PolicyManager(fileProtection: files)
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: root + "/a.txt", contents: Data("a".utf8)) }
        try IdentityContext.withThreadIdentity(bob) { try files.writeFile(atPath: root + "/b.txt", contents: Data("b".utf8)) }
        files.storage.injectFaults(refuse("unlink", at: root + "/b.txt"))

        let report = await manager.wipeData(forTenant: TenantID("contoso.com"))
        let byAccount = Dictionary(uniqueKeysWithValues: report.accounts.map { ($0.account, $0) })
        #expect(byAccount[bob]?.leftovers.map(\.path) == [root + "/b.txt"])
        // alice's files are gone, but her keys are not: never a complete wipe.
        #expect(byAccount[alice]?.leftovers.isEmpty == true)
        #expect(byAccount[alice]?.error?.code == 113)
        #expect(byAccount[alice]?.isComplete == false)
        #expect(!report.isComplete)
    }
}
