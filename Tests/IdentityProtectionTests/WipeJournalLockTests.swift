import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

private func wipe(_ manager: FileProtectionManager, _ identity: Identity) throws -> [String] {
    try IdentityContext.withThreadIdentity(identity) { () throws(ProtectionError) in try manager.removeFiles(ownedBy: identity) }
}

private func realRoots(_ manager: FileProtectionManager) -> [String] {
    manager.storage.roots.map { POSIX.realPath($0) ?? $0 }
}

private func lockFiles(_ state: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: state)) ?? [])
        .filter { $0.hasPrefix("wipe-") && $0.hasSuffix(".lock") }.sorted()
}

/// The descriptors this process holds open on files under `directory` (other tests run at the same time and
/// open files of their own).
private func openDescriptors(under directory: String) -> Int {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.filter { fd in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd))?.hasPrefix(directory) == true
    }.count
}

/// A crash of a wipe of `accounts` before it deleted anything: its entry stays, nobody runs it.
private func crashedEntry(_ f: Fixture, _ accounts: Set<Identity>) throws -> WipeJournal.Running {
    let journal = f.files.storage.journal
    let roots = realRoots(f.files)
    let cut = try #require(try journal.begin(accounts, roots: roots))
    try journal.end(cut, completed: false, accounts: accounts, roots: roots)
    return cut
}

@Suite("The wipe journal's locks: running wipes told apart from ended ones, without hanging, leaking or piling up", .serialized)
struct WipeJournalLockTests {
    @Test("another manager probing an ended wipe's lock while a manager starts: the start still finishes that wipe")
    func probeOfAnEndedWipeDoesNotHideIt() throws {
        let f = try Fixture()
        let state = f.files.storage.stateDirectory
        try write(f.files, f.path("a.txt"), as: alice)
        let cut = try crashedEntry(f, [alice])
        // What another manager's probe holds for an instant (its `end`, or its own start).
        let probe = open(state + "/wipe-\(cut.id).lock", O_RDONLY | O_CLOEXEC)
        #expect(probe >= 0)
        #expect(flock(probe, LOCK_SH | LOCK_NB) == 0)
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        close(probe)
        #expect(!exists(f.path("a.txt")), "the start returned with the crashed wipe of alice not finished: her file is still there")
        #expect(try f.files.storage.journal.pending().isEmpty)
    }

    @Test("another thread probing without pause while managers start: every start finishes the ended wipe")
    func probesRacingStarts() throws {
        let f = try Fixture()
        let rounds = 150
        var skipped = 0
        for round in 0..<rounds {
            try write(f.files, f.path("a\(round).txt"), as: alice)
            let cut = try crashedEntry(f, [alice])
            let entry = try #require(try f.files.storage.journal.pending().first { $0.id == cut.id })
            let other = WipeJournal(path: f.files.storage.journal.path)   // another manager's journal
            let stop = LockedValue(false)
            let started = DispatchSemaphore(value: 0)
            let done = onThread {
                started.signal()
                while !stop.withLock({ $0 }) { _ = other.isRunning(entry) }
            }
            started.wait()
            _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
            stop.withLock { $0 = true }
            done.wait()
            if exists(f.path("a\(round).txt")) {
                skipped += 1
                try f.files.storage.finishInterruptedRemovals()
            }
        }
        #expect(skipped == 0, "\(skipped) of \(rounds) starts returned with a crashed wipe of alice unfinished")
    }

    @Test("a FIFO in place of an ended wipe's lock file does not hang the next start, which finishes the wipe")
    func fifoInPlaceOfALockFile() throws {
        let f = try Fixture()
        let state = f.files.storage.stateDirectory
        try write(f.files, f.path("a.txt"), as: alice)
        let cut = try crashedEntry(f, [alice])
        let lock = state + "/wipe-\(cut.id).lock"
        unlink(lock)
        #expect(mkfifo(lock, 0o600) == 0)
        let keys = f.keys, policy = f.policy, root = f.root, stateDirectory = f.directory + "/state"
        let done = onThread {
            _ = try? FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: stateDirectory)
        }
        let finished = done.wait(timeout: .now() + 3) == .success
        #expect(finished, "FileProtectionManager.init still blocked after 3 s")
        #expect(!exists(f.path("a.txt")))
        if !finished {
            // Unblock it: a writer opens the FIFO.
            let writer = open(lock, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
            _ = done.wait(timeout: .now() + 10)
        }
    }

    @Test("wipes of one account over one root that keep failing leave one entry and one lock file")
    func failedWipesLeaveOneEntry() throws {
        let f = try Fixture()
        let state = f.files.storage.stateDirectory
        try write(f.files, f.path("a.txt"), as: alice)
        f.files.storage.injectFaults { op, path in
            op == "unlink" ? .ioFailure(path: path, operation: "unlink", errno: EIO) : nil
        }
        for _ in 0..<20 {
            #expect(throws: ProtectionError.self) { _ = try wipe(f.files, alice) }
        }
        let pending = try f.files.storage.journal.pending()
        #expect(pending.count == 1, "\(pending.count) entries, \(lockFiles(state).count) lock files for one account and one root")
        #expect(lockFiles(state).count == 1)
        f.files.storage.injectFaults(nil)
        _ = try wipe(f.files, alice)
        #expect(try f.files.storage.journal.pending().isEmpty)
        #expect(lockFiles(state).isEmpty)
    }

    @Test("no descriptor or lock file leaks over many wipes: empty, complete, failed, refused starts")
    func noDescriptorLeaks() throws {
        let f = try Fixture()
        let state = f.files.storage.stateDirectory
        _ = try wipe(f.files, bob)   // warm up caches
        let before = openDescriptors(under: f.directory)
        for round in 0..<40 {
            _ = try wipe(f.files, bob)                       // nothing to wipe
            try write(f.files, f.path("a\(round).txt"), as: alice)
            _ = try wipe(f.files, alice)                     // complete
            try write(f.files, f.path("m\(round).txt"), as: mallory)
            f.files.storage.injectFaults { op, _ in op == "unlink" ? .ioFailure(path: "", operation: "unlink", errno: EIO) : nil }
            #expect(throws: ProtectionError.self) { _ = try wipe(f.files, mallory) }   // failed
            f.files.storage.injectFaults(nil)
            _ = try wipe(f.files, mallory)
        }
        // Refused starts: the journal's state lock cannot be opened (a directory in its place).
        let journalLock = state + "/wipes.journal.lock"
        unlink(journalLock)
        mkdir(journalLock, 0o700)
        try write(f.files, f.path("keep.txt"), as: alice)
        for _ in 0..<40 {
            #expect(throws: ProtectionError.self) { _ = try wipe(f.files, alice) }
        }
        #expect(exists(f.path("keep.txt")), "a start that could not journal deleted something")
        rmdir(journalLock)
        #expect(openDescriptors(under: f.directory) == before)
        #expect(lockFiles(state).isEmpty, "\(lockFiles(state))")
        #expect(try f.files.storage.journal.pending().isEmpty)
    }

    @Test("a malformed journal refuses the wipe: nothing deleted, no lock file left, no descriptor leaked")
    func malformedJournalLeavesNoLockFile() throws {
        let f = try Fixture()
        let state = f.files.storage.stateDirectory
        try write(f.files, f.path("a.txt"), as: alice)
        writeRaw(Array(#"{"format": 2, "wipes": [{"id": "../../etc/passwd", "accounts": ["alice@contoso.com"], "roots": ["/"]}]}"#.utf8), to: state + "/wipes.journal")
        let before = openDescriptors(under: f.directory)
        for _ in 0..<10 {
            #expect(throws: ProtectionError.self) { _ = try wipe(f.files, alice) }
        }
        #expect(openDescriptors(under: f.directory) == before)
        #expect(lockFiles(state).isEmpty)
        #expect(exists(f.path("a.txt")))
    }

    @Test("two starts at once on a crashed wipe: it is finished once, the journal and lock files end empty")
    func twoStartsAtOnce() throws {
        let f = try Fixture()
        let state = f.files.storage.stateDirectory
        for round in 0..<15 {
            try write(f.files, f.path("a\(round).txt"), as: alice)
            try write(f.files, f.path("b\(round).txt"), as: bob)
            _ = try crashedEntry(f, [alice])
            let keys = f.keys, policy = f.policy, root = f.root, stateDirectory = f.directory + "/state"
            let failures = LockedValue(0)
            let gate = DispatchSemaphore(value: 0)
            let threads = (0..<2).map { _ in
                onThread {
                    gate.wait()
                    do { _ = try FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: stateDirectory) } catch {
                        failures.withLock { $0 += 1 }
                    }
                }
            }
            gate.signal(); gate.signal()
            for t in threads { #expect(t.wait(timeout: .now() + 20) == .success) }
            #expect(failures.withLock { $0 } == 0)
            #expect(!exists(f.path("a\(round).txt")))
            #expect(exists(f.path("b\(round).txt")))
            #expect(try f.files.storage.journal.pending().isEmpty)
            #expect(lockFiles(state).isEmpty)
        }
    }

    @Test("an account named with odd characters: a crash of its wipe is finished by the next start; case variants complete it")
    func oddAccountName() throws {
        let odd = Identity("Straße \"o'dd\"/..\\ ﬁ@contoso.com")
        let f = try Fixture()
        let policy = StaticManagedIdentityPolicy(managed: [odd, alice], dataIsolation: false)
        let files = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state2")
        try write(files, f.path("odd.txt"), as: odd)
        try write(files, f.path("alice.txt"), as: alice)
        let roots = realRoots(files)
        let cut = try #require(try files.storage.journal.begin([odd], roots: roots))
        try files.storage.journal.end(cut, completed: false, accounts: [odd], roots: roots)
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state2")
        #expect(!exists(f.path("odd.txt")))
        #expect(exists(f.path("alice.txt")))
        #expect(try files.storage.journal.pending().isEmpty)
        // A case variant (ß → SS, ﬁ → FI) completes an older failed entry.
        let cut2 = try #require(try files.storage.journal.begin([odd], roots: roots))
        try files.storage.journal.end(cut2, completed: false, accounts: [odd], roots: roots)
        let shouting = Identity("STRASSE \"O'DD\"/..\\ FI@CONTOSO.COM")
        #expect(shouting == odd)
        _ = try IdentityContext.withThreadIdentity(odd) { () throws(ProtectionError) in try files.removeFiles(ownedBy: shouting) }
        #expect(try files.storage.journal.pending().isEmpty)
    }
    @Test("a start removes lock files no entry names and nobody holds, once a minute old; a young one and a held one stay")
    func abandonedLockFilesRemoved() throws {
        let f = try Fixture()
        let state = f.files.storage.stateDirectory
        let journal = f.files.storage.journal
        func plant(_ id: String, age: Int) -> String {
            let path = state + "/wipe-\(id).lock"
            writeRaw([], to: path)
            var times = [timeval(tv_sec: time(nil) - age, tv_usec: 0), timeval(tv_sec: time(nil) - age, tv_usec: 0)]
            #expect(utimes(path, &times) == 0)
            return path
        }
        let abandoned = plant("00000000000000a1", age: 120)
        let young = plant("00000000000000a2", age: 0)
        let held = plant("00000000000000a3", age: 120)
        let holder = open(held, O_RDONLY | O_CLOEXEC)
        #expect(flock(holder, LOCK_EX | LOCK_NB) == 0)
        defer { close(holder) }
        // An ended wipe's lock file is named by its entry: it stays until the entry goes.
        let cut = try crashedEntry(f, [bob])
        try journal.removeAbandonedLocks(olderThan: 0)
        #expect(!exists(abandoned))
        #expect(exists(young) == false, "age 0 allows any age")
        #expect(exists(held))
        #expect(lockFiles(state).contains("wipe-\(cut.id).lock"))

        let again = plant("00000000000000a4", age: 0)
        _ = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state")
        #expect(exists(again), "a lock file younger than a minute may belong to a wipe about to journal itself")
        #expect(try journal.pending().isEmpty)
        #expect(lockFiles(state) == ["wipe-00000000000000a3.lock", "wipe-00000000000000a4.lock"])
    }
}

@Suite("What an account's name must be for data to be recorded for it", .serialized)
struct RecordableOwnerTests {
    @Test("an owner whose name no reader would read back (a control or invisible character) gets no file, directory or envelope", arguments: [
        "a\u{1}b@contoso.com", "a\nb@contoso.com", "a\u{200B}b@contoso.com",
    ])
    func unrecordableOwnerRefused(name: String) throws {
        let odd = Identity(name)
        let f = try Fixture()
        let policy = StaticManagedIdentityPolicy(managed: [odd, alice], fileEncryptionRequired: false, dataIsolation: false)
        let files = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state2")
        let data = DataProtectionManager(keyStore: f.keys, policy: policy)
        #expect(protectionError { try write(files, f.path("odd.txt"), as: odd) }?.code == 104)
        #expect(!exists(f.path("odd.txt")))
        try FileManager.default.createDirectory(atPath: f.path("dir"), withIntermediateDirectories: true)
        #expect(protectionError { try files.protectDirectory(atPath: f.path("dir"), owner: odd) }?.code == 104)
        #expect(try files.ownersUnderRoots().isEmpty)
        #expect(protectionError { try data.protect(Data("x".utf8), owner: odd) }?.code == 104)
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root) == ["dir"])
    }

    @Test("an owner with quotes, slashes, ß or a ligature in its name is recorded, read back and wiped", arguments: [
        "a\"b/..\\c@contoso.com", "Straße@contoso.com", "aﬁb@contoso.com",
    ])
    func unusualButValidOwnerWiped(name: String) throws {
        let odd = Identity(name)
        let f = try Fixture()
        let policy = StaticManagedIdentityPolicy(managed: [odd, alice], dataIsolation: false)
        let files = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state2")
        try write(files, f.path("odd.txt"), as: odd)
        #expect(try files.ownersUnderRoots() == [odd])
        let removed = try IdentityContext.withThreadIdentity(odd) { () throws(ProtectionError) in try files.removeFiles(ownedBy: odd) }
        #expect(removed == [f.path("odd.txt")])
    }
}
