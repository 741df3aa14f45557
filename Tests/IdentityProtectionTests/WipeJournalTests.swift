import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

@Suite("The wipe journal keeps every wipe that has not completed, with the roots it walks")
struct WipeJournalTests {
    @Test("a wipe that completes takes out its own entry and the older ones it covers, never a later one or one over other roots")
    func completionTakesOutOnlyWhatItCovered() throws {
        let f = try Fixture()
        let journal = WipeJournal(path: f.directory + "/state/wipes.journal")
        let first = try journal.begin([alice], roots: ["/r1"])
        let second = try journal.begin([alice, bob], roots: ["/r1"])
        let wider = try journal.begin([alice], roots: ["/r1", "/r2"])
        let later = try journal.begin([alice], roots: ["/r1"])
        #expect([first, second, wider, later] == [first, first + 1, first + 2, first + 3])

        // The second covers the first (older, same roots), not the wider one (a root it did not walk) nor
        // the later one (it began after the second did); bob stays in no entry but its own.
        try journal.complete(second, accounts: [alice], roots: ["/r1"])
        #expect(try journal.pending().map(\.id) == [second, wider, later])
        #expect(try journal.pending().first?.accounts == [bob.name])

        try journal.complete(later, accounts: [alice, bob], roots: ["/r1"])
        #expect(try journal.pending().map(\.id) == [wider])
        try journal.complete(wider, accounts: [alice], roots: ["/r2", "/r1"])
        #expect(try journal.pending().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: journal.path))
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
        // A wipe of alice over the fixture's root that a crash cut short before it deleted anything.
        _ = try WipeJournal(path: f.directory + "/state/wipes.journal").begin([alice], roots: [f.root])

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

    @Test("a journal that does not parse stops the manager's start, with its file and every other file left as they were", arguments: [
        #"{"format": 2, "wipes": []}"#,
        #"{"format": 2, "next": 3, "wipes": [{"id": 3, "accounts": ["alice@contoso.com"], "roots": []}]}"#,
        #"{"format": 3, "next": 1, "wipes": []}"#,
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
