import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// Keys, protected roots and managers in a temporary directory; alice and bob are managed.
struct WipeFixture {
    let directory: TemporaryDirectory
    let root: String
    let outside: String
    let keys: FileKeyStore
    let data: DataProtectionManager
    let files: FileProtectionManager
    let manager: PolicyManager

    init() throws {
        directory = try TemporaryDirectory()
        root = directory.file("root")
        outside = directory.file("outside")
        try FileManager.default.createDirectory(atPath: root + "/nested", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        keys = try FileKeyStore(atPath: directory.file("keys"))
        // The wipe is under test: what survives is read back from no identity, so isolation is off.
        let policy = StaticManagedIdentityPolicy(managed: [alice, bob], fileEncryptionRequired: true, dataIsolation: false)
        data = DataProtectionManager(keyStore: keys, policy: policy)
        files = try FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: directory.file("state"))
        manager = PolicyManager(fileProtection: files)
        manager.setPrimaryUser(alice)
    }

    func write(_ name: String, as identity: Identity?, _ text: String) throws {
        try IdentityContext.withThreadIdentity(identity) {
            try files.writeFile(atPath: root + "/" + name, contents: Data(text.utf8))
        }
    }
}

@Suite("Selective wipe (article AccountsAndPolicies)")
struct WipeTests {
    @Test("delegate returns false: every file of the account is gone, nothing of it decrypts, others intact")
    func runtimeWipe() async throws {
        let f = try WipeFixture()
        try f.write("a1.txt", as: alice, "alice one")
        try f.write("nested/a2.txt", as: alice, "alice two")
        try f.write("b1.txt", as: bob, "bob one")
        try f.write("d1.txt", as: dave, "dave one")
        try f.write("none.txt", as: nil, "nobody")
        let sealedAlice = try f.data.protect(Data("secret".utf8), owner: alice)
        let sealedBob = try f.data.protect(Data("bob secret".utf8), owner: bob)
        try FileManager.default.copyItem(atPath: f.root + "/a1.txt", toPath: f.outside + "/a1-copy.txt")

        let wiped = Recorder<Identity>()
        let thread = Recorder<Bool>()
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            wiped.append(account)
            thread.append(IdentityContext.isOnMainThread)
            return false
        })
        let report = await f.manager.wipeData(forAccount: alice)
        #expect(wiped.all == [alice])
        #expect(thread.all == [false])
        #expect(!report.handledByDelegate)
        #expect(report.error == nil)
        #expect(report.removedFiles.map { ($0 as NSString).lastPathComponent }.sorted() == ["a1.txt", "a2.txt"])
        #expect(!FileManager.default.fileExists(atPath: f.root + "/a1.txt"))
        #expect(!FileManager.default.fileExists(atPath: f.root + "/nested/a2.txt"))
        #expect(throws: ProtectionError.self) { try f.files.readFile(atPath: f.outside + "/a1-copy.txt") }
        #expect(throws: ProtectionError.self) { try f.data.unprotect(sealedAlice) }
        #expect(try f.files.readFile(atPath: f.root + "/b1.txt") == Data("bob one".utf8))
        #expect(try f.files.readFile(atPath: f.root + "/d1.txt") == Data("dave one".utf8))
        #expect(try f.files.readFile(atPath: f.root + "/none.txt") == Data("nobody".utf8))
        #expect(try f.data.unprotect(sealedBob) == Data("bob secret".utf8))
    }

    @Test("no delegate behaves like a delegate returning false")
    func noDelegate() async throws {
        let f = try WipeFixture()
        try f.write("a.txt", as: alice, "a")
        let report = await f.manager.wipeData(forAccount: alice)
        #expect(report.removedFiles.count == 1)
        #expect(!FileManager.default.fileExists(atPath: f.root + "/a.txt"))
    }

    @Test("delegate returns true: the runtime deletes nothing, and still posts wipeDidComplete")
    func delegateWipe() async throws {
        let f = try WipeFixture()
        try f.write("a.txt", as: alice, "a")
        f.manager.delegate = ClosureDelegate(onWipe: { _ in true })
        let notified = Recorder<String>()
        let token = f.manager.notificationCenter.addObserver(forName: .wipeDidComplete, object: f.manager, queue: nil) { note in
            notified.append(note.userInfo?["account"] as? String ?? "?")
        }
        defer { f.manager.notificationCenter.removeObserver(token) }
        let report = await f.manager.wipeData(forAccount: alice)
        #expect(report.handledByDelegate && report.removedFiles.isEmpty)
        #expect(try f.files.readFile(atPath: f.root + "/a.txt") == Data("a".utf8))
        #expect(notified.all == ["alice@contoso.com"])
    }

    @Test("wipeDidComplete comes after the files are gone; windows showing the account are cleared")
    func ordering() async throws {
        let f = try WipeFixture()
        try f.write("a.txt", as: alice, "a")
        #expect(await f.manager.setUIPolicyIdentity(alice, for: "w1") == .success)
        #expect(await f.manager.setUIPolicyIdentity(dave, for: "w2") == .success)
        let events = f.manager.events
        let path = f.root + "/a.txt"
        let existedAtNotification = Recorder<Bool>()
        let token = f.manager.notificationCenter.addObserver(forName: .wipeDidComplete, object: nil, queue: nil) { _ in
            existedAtNotification.append(FileManager.default.fileExists(atPath: path))
        }
        defer { f.manager.notificationCenter.removeObserver(token) }
        await f.manager.wipeData(forAccount: alice)
        #expect(existedAtNotification.all == [false])
        #expect(f.manager.uiPolicyIdentity(for: "w1") == nil)
        #expect(f.manager.uiPolicyIdentity(for: "w2") == dave)
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .accountBlocked(alice, reason: .wiped))   // from the start of the wipe
        #expect(await iterator.next() == .uiIdentityDidChange(window: "w1", identity: nil))
        #expect(await iterator.next() == .wipeDidComplete(account: alice))
    }

    @Test("unenroll with wipe runs the wipe")
    func unenrollWithWipe() async throws {
        let f = try WipeFixture()
        try f.write("a.txt", as: alice, "a")
        try f.write("b.txt", as: bob, "b")
        let enrollment = EnrollmentManager(policyManager: f.manager, service: LocalEnrollmentService(policySource: nil), scheduler: ManualScheduler())
        f.manager.setPrimaryUser(nil)
        #expect(await enrollment.registerAndEnrollAccount(alice).didSucceed)
        #expect(await enrollment.deRegisterAndUnenrollAccount(alice, withWipe: true).statusCode == .unenrollmentSuccess)
        #expect(!FileManager.default.fileExists(atPath: f.root + "/a.txt"))
        #expect(try f.files.readFile(atPath: f.root + "/b.txt") == Data("b".utf8))
    }
}

@Suite("PolicyManager as the protection module's ManagedIdentityPolicy")
struct ProtectionIntegrationTests {
    @Test("the primary user's files are encrypted when its policy requires it; other accounts' are not")
    func encryptionFollowsPolicy() async throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        let source = StaticPolicySource([alice: Policy(identity: nil, isFileEncryptionRequired: true)])
        let manager = PolicyManager(policySource: source)
        manager.setPrimaryUser(alice)
        let files = try FileProtectionManager(
            roots: [directory.file("root")], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
        manager.fileProtection = files
        for identity in [alice, dave] {
            try IdentityContext.withThreadIdentity(identity) {
                try files.writeFile(atPath: directory.file("root/\(identity.name).txt"), contents: Data("x".utf8))
            }
        }
        #expect(try files.isFileEncrypted(atPath: directory.file("root/alice@contoso.com.txt")))
        #expect(try !files.isFileEncrypted(atPath: directory.file("root/dave@gmail.com.txt")))
        source.setPolicy(Policy(identity: nil, isFileEncryptionRequired: false), for: alice)
        #expect(!manager.isFileEncryptionRequired(for: alice))
        let report = await manager.wipeData(forAccount: alice)
        #expect(report.removedFiles.count == 1)
        #expect(FileManager.default.fileExists(atPath: directory.file("root/dave@gmail.com.txt")))
    }
}
