import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

/// A policy that, once armed, holds the next creation (`.create`) inside its access check: the creation then
/// has its ticket (it is "in flight") and has not written anything yet.
private final class GatedCreationPolicy: ManagedIdentityPolicy {
    let base: StaticManagedIdentityPolicy
    let armed = LockedValue(false)
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)

    init(base: StaticManagedIdentityPolicy) { self.base = base }

    func isManaged(_ identity: Identity) -> Bool { base.isManaged(identity) }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { base.isFileEncryptionRequired(for: identity) }
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        if access == .create, armed.withLock({ armed in defer { armed = false }; return armed }) {
            entered.signal()
            release.wait()
        }
        return base.refusal(of: access, to: owner)
    }
}

@Suite("The wipe journal under wipes of several managers at once, failed starts, links and the first format")
struct WipeJournalRaceTests {
    @Test("a completed wipe of an account spelled in another case completes the older entry of that account")
    func caseFoldedAccountCompletesOlderEntry() throws {
        let f = try Fixture()
        let journal = f.files.storage.journal
        try write(f.files, f.path("a.txt"), as: alice)
        // A wipe that fails half-way: its entry stays.
        f.files.storage.injectFaults { op, path in
            op == "unlink" && path.hasSuffix("/a.txt") ? .ioFailure(path: path, operation: "unlink", errno: EIO) : nil
        }
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try f.files.removeFiles(ownedBy: alice) }
        }
        f.files.storage.injectFaults(nil)
        #expect(try journal.pending().map(\.accounts) == [[alice.name]])

        // The same account, spelled in capitals, wiped completely over the same roots.
        let shouting = Identity("ALICE@CONTOSO.COM")
        let removed = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try f.files.removeFiles(ownedBy: shouting)
        }
        #expect(removed == [f.path("a.txt")])
        #expect(try journal.pending().isEmpty, "the older entry of the same account over the same roots stays")

        // Alice is enrolled again and writes; a restart must not wipe her again.
        try write(f.files, f.path("new.txt"), as: alice)
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        #expect(exists(f.path("new.txt")), "the restart re-ran a wipe that had completed: alice's new data is gone")
    }

    @Test("a wipe that completes leaves the entries of wipes still running and of wipes begun after it, also when the journal emptied in between")
    func completionLeavesRunningAndLaterWipes() throws {
        let f = try Fixture()
        let state = f.directory + "/state"
        let m2 = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: state)
        try FileManager.default.createDirectory(atPath: f.path("aa"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: f.path("zz"), withIntermediateDirectories: true)
        try write(f.files, f.path("zz/old.txt"), as: alice)
        let journal = f.files.storage.journal

        // W1 (manager 1) passes root/aa and stops before root/zz.
        let w1Paused = DispatchSemaphore(value: 0), w1Resume = DispatchSemaphore(value: 0)
        f.files.storage.injectFaults { op, path in
            if op == "list", path == f.path("zz") { w1Paused.signal(); w1Resume.wait() }
            return nil
        }
        let w1Done = onThread {
            _ = IdentityContext.withThreadIdentity(alice) { try? f.files.removeFiles(ownedBy: alice) }
        }
        w1Paused.wait()
        let w1 = try #require(try journal.pending().first?.id)

        // W2 (manager 2) wipes alice completely; W1 still runs, so its entry stays.
        _ = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try m2.removeFiles(ownedBy: alice) }
        #expect(try journal.pending().map(\.id) == [w1])

        // Alice writes again through manager 2 (in a directory W1 has passed); W3 (manager 2) begins and
        // stops at the root, before deleting anything.
        try write(m2, f.path("aa/new.txt"), as: alice)
        let w3Paused = DispatchSemaphore(value: 0), w3Resume = DispatchSemaphore(value: 0)
        m2.storage.injectFaults { op, path in
            if op == "list", path == f.root { w3Paused.signal(); w3Resume.wait() }
            return nil
        }
        let w3Done = onThread {
            _ = IdentityContext.withThreadIdentity(alice) { try? m2.removeFiles(ownedBy: alice) }
        }
        w3Paused.wait()
        let w3 = try #require(try journal.pending().last?.id)
        #expect(w3 != w1)

        // W1 completes: W3 began after it and still runs.
        w1Resume.signal()
        w1Done.wait()
        f.files.storage.injectFaults(nil)
        #expect(try journal.pending().map(\.id) == [w3], "W1's completion took out W3's entry")
        // A start meanwhile leaves a running wipe to its owner.
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: state)
        #expect(try journal.pending().map(\.id) == [w3])

        w3Resume.signal()
        w3Done.wait()
        m2.storage.injectFaults(nil)
        #expect(!exists(f.path("aa/new.txt")))
        #expect(try journal.pending().isEmpty)
    }

    @Test("a completing wipe does not take out another manager's older entry still waiting for a creation in flight")
    func crossManagerCreationInFlight() throws {
        let f = try Fixture()
        let state = f.directory + "/state"
        let gated = GatedCreationPolicy(base: f.policy)
        let m1 = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: gated, stateDirectory: state)
        let journal = f.files.storage.journal
        try write(f.files, f.path("a.txt"), as: alice)

        // A creation of alice's file in manager 1, held after it took its ticket.
        gated.armed.withLock { $0 = true }
        let writeDone = onThread {
            do { try write(m1, f.path("x.txt"), as: alice) } catch { Issue.record("late write: \(error)") }
        }
        gated.entered.wait()

        // E (manager 1) begins, journals, and waits for that creation; its walk stops at the root.
        let ePaused = DispatchSemaphore(value: 0), eResume = DispatchSemaphore(value: 0)
        m1.storage.injectFaults { op, path in
            if op == "list", path == f.root { ePaused.signal(); eResume.wait() }
            return nil
        }
        let eDone = onThread {
            _ = IdentityContext.withThreadIdentity(alice) { try? m1.removeFiles(ownedBy: alice) }
        }
        #expect(try eventually { try !journal.pending().isEmpty })
        let e = try #require(try journal.pending().first?.id)

        // W (manager 2, same roots) wipes alice and completes: E's entry stays, E has not walked.
        _ = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try f.files.removeFiles(ownedBy: alice) }
        #expect(try journal.pending().map(\.id) == [e], "W took out E's entry although E had not walked yet")

        // The creation E waits for writes now; E walks and removes it.
        gated.release.signal()
        writeDone.wait()
        ePaused.wait()
        #expect(exists(f.path("x.txt")))
        eResume.signal()
        eDone.wait()
        m1.storage.injectFaults(nil)
        #expect(!exists(f.path("x.txt")))
        #expect(try journal.pending().isEmpty)
    }

    @Test("a wipe over a root's real path completes an entry over a link to that root; a later start leaves re-enrolled data")
    func linkSpelledRootIsTheSameRoot() throws {
        let f = try Fixture()
        let state = f.directory + "/state"
        let link = f.directory + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: f.root)
        let viaLink = try FileProtectionManager(roots: [link], keyStore: f.keys, policy: f.policy, stateDirectory: state)
        try write(f.files, f.path("a.txt"), as: alice)
        // A wipe through the link manager fails half-way: its entry, over the link's directory, stays.
        viaLink.storage.injectFaults { op, path in
            op == "unlink" ? .ioFailure(path: path, operation: "unlink", errno: EIO) : nil
        }
        _ = try? IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try viaLink.removeFiles(ownedBy: alice) }
        viaLink.storage.injectFaults(nil)
        #expect(try f.files.storage.journal.pending().map(\.roots) == [[POSIX.realPath(f.root) ?? f.root]])

        // The direct manager wipes alice over the same directory, completely.
        let removed = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try f.files.removeFiles(ownedBy: alice) }
        #expect(removed == [f.path("a.txt")])
        #expect(try f.files.storage.journal.pending().isEmpty, "the entry over the same directory spelled as a link stays")

        try write(f.files, f.path("new.txt"), as: alice)
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: state)
        #expect(exists(f.path("new.txt")), "a restart re-ran a wipe whose directory had been wiped since: re-enrolled data gone")
    }

    @Test("a start that fails to finish a wipe takes its place in the journal: failed starts do not add entries; a successful one clears it")
    func failedStartsDoNotAccumulate() throws {
        let f = try Fixture()
        let other = f.directory + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        try write(f.files, f.path("a.txt"), as: alice)
        try write(f.files, f.path("b.txt"), as: bob)
        let journal = f.files.storage.journal
        // A wipe over a root this manager lacks, cut short.
        let cut = try #require(try journal.begin([alice], roots: [other]))
        try journal.end(cut, completed: false, accounts: [alice], roots: [other])
        f.files.storage.injectFaults { op, path in
            op == "unlink" ? .ioFailure(path: path, operation: "unlink", errno: EIO) : nil
        }
        for _ in 0..<3 {
            #expect(throws: ProtectionError.self) { try f.files.storage.finishInterruptedRemovals() }
        }
        let left = try journal.pending()
        #expect(left.count == 1)
        #expect(Set(left.flatMap(\.roots)) == [POSIX.realPath(f.root) ?? f.root, other])
        f.files.storage.injectFaults(nil)
        try f.files.storage.finishInterruptedRemovals()
        #expect(try journal.pending().isEmpty)
        #expect(!exists(f.path("a.txt")))
        #expect(exists(f.path("b.txt")))
    }

    @Test("a start leaves a running wipe alone; the journal as a crash of it would leave it is finished by the next start")
    func runningWipeLeftAloneCrashedOneFinished() throws {
        let f = try Fixture()
        let state = f.directory + "/state"
        try FileManager.default.createDirectory(atPath: f.path("aa"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: f.path("zz"), withIntermediateDirectories: true)
        for dir in ["aa", "zz"] {
            try write(f.files, f.path("\(dir)/alice.txt"), as: alice)
            try write(f.files, f.path("\(dir)/bob.txt"), as: bob)
        }
        let paused = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0)
        f.files.storage.injectFaults { op, path in
            if op == "list", path == f.path("zz") { paused.signal(); resume.wait() }
            return nil
        }
        let done = onThread { _ = IdentityContext.withThreadIdentity(alice) { try? f.files.removeFiles(ownedBy: alice) } }
        paused.wait()
        let journalPath = state + "/wipes.journal"
        let snapshot = try #require(FileManager.default.contents(atPath: journalPath))
        #expect(!exists(f.path("aa/alice.txt")))
        // A start (over another root) while the wipe runs: the wipe is its owner's.
        let other = f.directory + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        _ = try FileProtectionManager(roots: [other], keyStore: f.keys, policy: f.policy, stateDirectory: state)
        #expect(exists(f.path("zz/alice.txt")))
        #expect(try f.files.storage.journal.pending().count == 1)
        resume.signal()
        done.wait()
        f.files.storage.injectFaults(nil)
        #expect(!exists(f.path("zz/alice.txt")))
        // The snapshot restored (as a crash of the wipe would have left it) is finished, and is then gone.
        try write(f.files, f.path("zz/alice-again.txt"), as: alice)
        try snapshot.write(to: URL(fileURLWithPath: journalPath))
        _ = try FileProtectionManager(roots: [other], keyStore: f.keys, policy: f.policy, stateDirectory: state)
        #expect(!exists(journalPath))
        #expect(!exists(f.path("zz/alice-again.txt")))
        #expect(exists(f.path("aa/bob.txt")) && exists(f.path("zz/bob.txt")))
    }

    @Test("a root added during a wipe is not recorded in its entry, and an entry over a link root is finished through the link")
    func addRootAndLinkRoot() throws {
        let f = try Fixture()
        let state = f.directory + "/state"
        let added = f.directory + "/added"
        try FileManager.default.createDirectory(atPath: added, withIntermediateDirectories: true)
        let paused = DispatchSemaphore(value: 0), resume = DispatchSemaphore(value: 0)
        f.files.storage.injectFaults { op, path in
            if op == "list", path == f.root { paused.signal(); resume.wait() }
            return nil
        }
        let done = onThread { _ = IdentityContext.withThreadIdentity(alice) { try? f.files.removeFiles(ownedBy: alice) } }
        paused.wait()
        f.files.addRoot(added)
        #expect(try f.files.storage.journal.pending().map(\.roots) == [[POSIX.realPath(f.root) ?? f.root]])
        resume.signal()
        done.wait()
        f.files.storage.injectFaults(nil)
        #expect(try f.files.storage.journal.pending().isEmpty)

        // An entry over a link to the root, cut short, finished by a manager that has only an unrelated root.
        let link = f.directory + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: f.root)
        try write(f.files, f.path("a.txt"), as: alice)
        try write(f.files, f.path("b.txt"), as: bob)
        let cut = try #require(try f.files.storage.journal.begin([alice], roots: [link, f.root, link]))
        try f.files.storage.journal.end(cut, completed: false, accounts: [alice], roots: [link, f.root])
        _ = try FileProtectionManager(roots: [added], keyStore: f.keys, policy: f.policy, stateDirectory: state)
        #expect(!exists(f.path("a.txt")))
        #expect(exists(f.path("b.txt")))
        #expect(try f.files.storage.journal.pending().isEmpty)
    }

    @Test("many threads of two managers beginning and ending wipes at once: unique ids, nothing lost, journal empty at the end")
    func concurrentBeginAndEnd() throws {
        let f = try Fixture()
        let second = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        let journals = [f.files.storage.journal, second.storage.journal]
        let ids = LockedValue<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 48) { index in
            do {
                let account = Identity("user\(index % 5)@contoso.com")
                let roots = index % 3 == 0 ? ["/r1", "/r2"] : ["/r1"]
                guard let running = try journals[index % 2].begin([account], roots: roots) else {
                    Issue.record("\(index): nothing began")
                    return
                }
                ids.withLock { $0.append(running.id) }
                // Running: in the journal, whatever the others complete.
                #expect(try journals[(index + 1) % 2].pending().contains { $0.id == running.id })
                try journals[index % 2].end(running, completed: true, accounts: [account], roots: ["/r1", "/r2"])
            } catch {
                Issue.record("\(index): \(error)")
            }
        }
        let all = ids.withLock { $0 }
        #expect(Set(all).count == 48, "ids were reused")
        #expect(try journals[0].pending().isEmpty)

        // Real wipes from both managers at once, across accounts.
        for account in [alice, bob, mallory] {
            for i in 0..<3 { try write(f.files, f.path("\(account.name)-\(i)"), as: account) }
        }
        DispatchQueue.concurrentPerform(iterations: 12) { index in
            let account = [alice, bob, mallory][index % 3]
            _ = IdentityContext.withThreadIdentity(account) { try? [f.files, second][index % 2].removeFiles(ownedBy: account) }
        }
        #expect(try journals[0].pending().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root).isEmpty)
    }

    @Test("a journal of the first format is completed account by account by wipes over any roots, and rewritten in the second")
    func formatOneCompatibility() throws {
        let f = try Fixture()
        let journalPath = f.directory + "/state/wipes.journal"
        try Data(#"{"format": 1, "accounts": ["alice@contoso.com", "bob@contoso.com"]}"#.utf8).write(to: URL(fileURLWithPath: journalPath))
        let journal = f.files.storage.journal
        let firstFormat = String(repeating: "0", count: 16)
        #expect(try journal.pending() == [WipeJournal.Entry(id: firstFormat, accounts: [alice.name, bob.name], roots: [])])
        _ = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try f.files.removeFiles(ownedBy: alice) }
        #expect(try journal.pending() == [WipeJournal.Entry(id: firstFormat, accounts: [bob.name], roots: [])])
        let text = try String(contentsOfFile: journalPath, encoding: .utf8)
        #expect(text.contains(#""format":2"#))
        _ = try IdentityContext.withThreadIdentity(bob) { () throws(ProtectionError) in try f.files.removeFiles(ownedBy: bob) }
        #expect(!exists(journalPath))
    }
}
