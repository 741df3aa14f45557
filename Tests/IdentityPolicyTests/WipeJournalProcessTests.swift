import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

@Suite("A wipe of another process: left alone while it runs, finished once the process is killed")
struct WipeJournalProcessTests {
    @Test("a start leaves a wipe another process is running alone; once that process is killed, the next start finishes it", .timeLimit(.minutes(10)))
    func wipeOfAnotherProcess() throws {
        guard let harness = HarnessChild.executable else { throw HarnessChild.Missing() }
        let directory = try TemporaryDirectory()
        let (root, state, keysPath) = (directory.file("root"), directory.file("state"), directory.file("keys"))
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let policy = StaticManagedIdentityPolicy(managed: [alice, bob])
        let keys = try FileKeyStore(atPath: keysPath)
        let files = try FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: state)
        for owner in [alice, bob] {
            try IdentityContext.withThreadIdentity(owner) {
                try files.writeFile(atPath: root + "/\(owner.name).txt", contents: Data("data of \(owner.name)".utf8))
            }
        }
        // The child stops at the owner index's lock, with its wipe journaled and running, before its keys go.
        let indexLock = open(files.storage.stateDirectory + "/owners.index.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(flock(indexLock, LOCK_EX) == 0)
        let child = Process()
        child.executableURL = harness
        child.arguments = ["wipe-child", state, root, keysPath, alice.name]
        child.standardOutput = Pipe()
        try child.run()
        var journaled = false
        for _ in 0..<1000 where !journaled {
            journaled = (try? files.storage.journal.pending().count) == 1
            if !journaled { usleep(10_000) }
        }
        #expect(journaled)
        let entry = try #require(try files.storage.journal.pending().first)
        #expect(files.storage.journal.isRunning(entry))

        _ = try FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: state)
        #expect(try files.storage.journal.pending() == [entry], "a start took over a wipe another process runs")

        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        flock(indexLock, LOCK_UN)
        close(indexLock)
        #expect(!files.storage.journal.isRunning(entry))
        _ = try FileProtectionManager(roots: [root], keyStore: FileKeyStore(atPath: keysPath), policy: policy, stateDirectory: state)
        #expect(!FileManager.default.fileExists(atPath: root + "/\(alice.name).txt"))
        #expect(FileManager.default.fileExists(atPath: root + "/\(bob.name).txt"))
        #expect(try keys.identitiesWithKeys()?.identities == [bob])
        #expect(try files.storage.journal.pending().isEmpty)
        let lockFiles = try FileManager.default.contentsOfDirectory(atPath: files.storage.stateDirectory).filter { $0.hasPrefix("wipe-") }
        #expect(lockFiles.isEmpty)
    }
}
