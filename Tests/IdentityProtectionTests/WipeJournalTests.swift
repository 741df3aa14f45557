import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

@Suite("The wipe journal keeps every wipe that has not completed, with the roots it walks")
struct WipeJournalTests {
    @Test("a wipe that completes takes out its own entry and the older ones it covers that are not running, never a running, a later one or one over other roots")
    func completionTakesOutOnlyWhatItCovered() throws {
        let f = try Fixture()
        let journal = WipeJournal(path: f.directory + "/state/wipes.journal")
        func begin(_ accounts: Set<Identity>, _ roots: [String]) throws -> WipeJournal.Running {
            try #require(try journal.begin(accounts, roots: roots))
        }
        let failed = try begin([alice], ["/r1"])
        try journal.end(failed, completed: false, accounts: [alice], roots: ["/r1"])
        let running = try begin([alice], ["/r1"])
        let completing = try begin([alice, bob], ["/r1"])
        let wider = try begin([alice], ["/r1", "/r2"])
        try journal.end(wider, completed: false, accounts: [alice], roots: ["/r1", "/r2"])
        let later = try begin([alice], ["/r1"])
        try journal.end(later, completed: false, accounts: [alice], roots: ["/r1"])
        // Each wipe that failed took the place of the older failed ones it covers whole: the wider one took the
        // first one's (alice over /r1); the later one covers neither the wider one (a root more) nor the running ones.
        #expect(try journal.pending().map(\.id) == [running, completing, wider, later].map(\.id))
        #expect(try journal.pending().map(journal.isRunning) == [true, true, false, false])

        // The running one may still be waiting for writes in its own manager, the wider one has a root not
        // walked, the later one began after: the completing wipe takes out its own entry only.
        try journal.end(completing, completed: true, accounts: [alice, bob], roots: ["/r1"])
        #expect(try journal.pending().map(\.id) == [running, wider, later].map(\.id))

        try journal.end(running, completed: true, accounts: [alice], roots: ["/r1"])
        #expect(try journal.pending().map(\.id) == [wider, later].map(\.id))
        let covering = try begin([alice], ["/r2", "/r1"])
        try journal.end(covering, completed: true, accounts: [alice], roots: ["/r2", "/r1"])
        #expect(try journal.pending().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: journal.path))
        let lockFiles = try FileManager.default.contentsOfDirectory(atPath: f.directory + "/state").filter { $0.hasPrefix("wipe-") }
        #expect(lockFiles.isEmpty, "lock files of wipes no longer in the journal: \(lockFiles)")
    }

    @Test("accounts are compared as identities: a completed wipe of ALICE@CONTOSO.COM completes the older entry of alice@contoso.com")
    func accountsComparedAsIdentities() throws {
        let f = try Fixture()
        let journal = WipeJournal(path: f.directory + "/state/wipes.journal")
        let failed = try #require(try journal.begin([alice], roots: ["/r1"]))
        try journal.end(failed, completed: false, accounts: [alice], roots: ["/r1"])
        let shouted = try #require(try journal.begin(["ALICE@CONTOSO.COM"], roots: ["/r1"]))
        try journal.end(shouted, completed: true, accounts: ["ALICE@CONTOSO.COM"], roots: ["/r1"])
        #expect(try journal.pending().isEmpty)
    }

    @Test("two managers on one state directory wipe one account over different roots: the first to complete leaves the other's entry, and a crash of the other is finished at the next start")
    func wipeOfOneAccountByTwoManagers() throws {
        let f = try Fixture()
        let otherRoot = f.directory + "/other"
        try FileManager.default.createDirectory(atPath: otherRoot, withIntermediateDirectories: true)
        let other = try FileProtectionManager(
            roots: [otherRoot], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try f.files.writeFile(atPath: f.path("a.txt"), contents: Data("mine".utf8))
            try other.writeFile(atPath: otherRoot + "/a.txt", contents: Data("mine".utf8))
        }

        // The other manager's wipe stops at its root until the first manager's wipe has completed.
        let paused = DispatchSemaphore(value: 0)
        let resume = DispatchSemaphore(value: 0)
        other.storage.injectFaults { operation, path in
            if operation == "list", path == otherRoot {
                paused.signal()
                resume.wait()
            }
            return nil
        }
        let otherDone = DispatchSemaphore(value: 0)
        let otherResult = LockedValue<Result<[String], ProtectionError>?>(nil)
        Thread {
            let result = IdentityContext.withThreadIdentity(alice) {
                Result { () throws(ProtectionError) in try other.removeFiles(ownedBy: alice) }
            }
            otherResult.withLock { $0 = result }
            otherDone.signal()
        }.start()
        paused.wait()
        let removed = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try f.files.removeFiles(ownedBy: alice)
        }
        #expect(removed == [f.path("a.txt")])
        let journalPath = f.directory + "/state/wipes.journal"
        let pending = try f.files.storage.journal.pending()
        #expect(pending.map(\.accounts) == [[alice.name]], "the first wipe to complete took out the other's entry")
        #expect(pending.map(\.roots) == [[otherRoot]])
        // What a crash of the other process here would leave.
        let leftByACrash = try #require(FileManager.default.contents(atPath: journalPath))

        resume.signal()
        otherDone.wait()
        other.storage.injectFaults(nil)
        #expect(try otherResult.withLock { $0 }?.get() == [otherRoot + "/a.txt"])
        #expect(!FileManager.default.fileExists(atPath: journalPath))

        // Had it crashed, the next start over its roots finishes its wipe: alice's file written since goes.
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try other.writeFile(atPath: otherRoot + "/b.txt", contents: Data("mine".utf8))
        }
        try leftByACrash.write(to: URL(fileURLWithPath: journalPath))
        _ = try FileProtectionManager(roots: [otherRoot], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        #expect(!FileManager.default.fileExists(atPath: otherRoot + "/b.txt"))
        #expect(!FileManager.default.fileExists(atPath: journalPath))
    }

    @Test("the next start finishes a cut-short wipe over the roots it had, also roots the new manager does not have")
    func restartWalksTheRootsOfTheWipe() throws {
        let f = try Fixture()
        let otherRoot = f.directory + "/other"
        try FileManager.default.createDirectory(atPath: otherRoot, withIntermediateDirectories: true)
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try f.files.writeFile(atPath: f.path("a.txt"), contents: Data("mine".utf8))
        }
        try IdentityContext.withThreadIdentity(bob) { () throws(ProtectionError) in
            try f.files.writeFile(atPath: f.path("b.txt"), contents: Data("bob's".utf8))
        }
        // A wipe of alice over the fixture's root that ended before it deleted anything (as a crash would:
        // its entry stays, and nobody holds its lock).
        let journal = WipeJournal(path: f.directory + "/state/wipes.journal")
        let cut = try #require(try journal.begin([alice], roots: [f.root]))
        try journal.end(cut, completed: false, accounts: [alice], roots: [f.root])

        let restarted = try FileProtectionManager(
            roots: [otherRoot], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        #expect(!FileManager.default.fileExists(atPath: f.path("a.txt")))
        #expect(FileManager.default.fileExists(atPath: f.path("b.txt")))
        #expect(try restarted.storage.journal.pending().isEmpty)
    }

    @Test("a journal of the first format is read as one wipe of its accounts and finished at start")
    func firstFormatIsFinished() throws {
        let f = try Fixture()
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try f.files.writeFile(atPath: f.path("a.txt"), contents: Data("mine".utf8))
        }
        let journalPath = f.directory + "/state/wipes.journal"
        try Data(#"{"format": 1, "accounts": ["alice@contoso.com"]}"#.utf8).write(to: URL(fileURLWithPath: journalPath))
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        #expect(!FileManager.default.fileExists(atPath: f.path("a.txt")))
        #expect(!FileManager.default.fileExists(atPath: journalPath))
    }

    @Test("a journal that does not parse, or that the writer cannot have written, stops the manager's start, with its file and every other file left as they were", arguments: [
        #"{"format": 2, "wipes": []}"#,
        #"{"format": 2, "wipes": [{"id": 3, "accounts": ["alice@contoso.com"], "roots": []}]}"#,
        #"{"format": 2, "wipes": [{"id": "../../escape", "accounts": ["alice@contoso.com"], "roots": []}]}"#,
        #"{"format": 2, "wipes": [{"id": "00000000000000AA", "accounts": ["alice@contoso.com"], "roots": []}]}"#,
        #"{"format": 2, "wipes": [{"id": "00000000000000aa", "accounts": [], "roots": []}]}"#,
        #"{"format": 2, "wipes": [{"id": "00000000000000aa", "accounts": [""], "roots": []}]}"#,
        #"{"format": 2, "wipes": [{"id": "00000000000000aa", "accounts": ["alice@contoso.com"], "roots": ["relative/root"]}]}"#,
        #"{"format": 2, "wipes": [{"id": "00000000000000aa", "accounts": ["alice@contoso.com"], "roots": []}, {"id": "00000000000000aa", "accounts": ["bob@contoso.com"], "roots": []}]}"#,
        #"{"format": 2, "accounts": ["alice@contoso.com"], "wipes": [{"id": "00000000000000aa", "accounts": ["alice@contoso.com"], "roots": []}]}"#,
        #"{"format": 1, "accounts": ["alice@contoso.com"], "wipes": []}"#,
        #"{"format": 1, "accounts": []}"#,
        #"{"format": 3, "wipes": []}"#,
        #"{"format": 1}"#,
        "not json",
    ])
    func malformedJournalRefusesToStart(document: String) throws {
        let f = try Fixture()
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try f.files.writeFile(atPath: f.path("a.txt"), contents: Data("mine".utf8))
        }
        let journalPath = f.directory + "/state/wipes.journal"
        try Data(document.utf8).write(to: URL(fileURLWithPath: journalPath))
        let error = protectionError {
            try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        }
        #expect(error == .ioFailure(path: journalPath, operation: "read wipe journal (malformed)", errno: EIO))
        #expect(FileManager.default.fileExists(atPath: f.path("a.txt")))
        #expect(FileManager.default.contents(atPath: journalPath) == Data(document.utf8))
    }
}
