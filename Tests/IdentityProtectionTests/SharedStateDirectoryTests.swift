import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

@Suite("Managers sharing one state directory keep every owner record")
struct SharedStateDirectoryTests {
    @Test("two file managers on one state directory write files in turn and at once: every file keeps its owner, for both and for a third made later")
    func ownerIndexSharedByTwoManagers() throws {
        // Stored in the clear: the owner index is the only record of their owners.
        let f = try Fixture(ownerStorage: .indexOnly, encryptionRequired: false, isolated: true)
        let second = try FileProtectionManager(
            roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state", ownerStorage: .indexOnly)
        let managers = [f.files, second]
        let owners = [alice, bob]
        // In turn: each save starts from the other's.
        for index in 0..<20 {
            let owner = owners[index % 2]
            try IdentityContext.withThreadIdentity(owner) { () throws(ProtectionError) in
                try managers[index / 2 % 2].writeFile(atPath: f.path("turn-\(index)"), contents: Data("\(index)".utf8))
            }
        }
        // At once, from two threads.
        DispatchQueue.concurrentPerform(iterations: 40) { index in
            let owner = owners[index % 2]
            do {
                try IdentityContext.withThreadIdentity(owner) { () throws(ProtectionError) in
                    try managers[index / 2 % 2].writeFile(atPath: f.path("race-\(index)"), contents: Data("\(index)".utf8))
                }
            } catch {
                Issue.record("\(index): \(error)")
            }
        }
        let third = try FileProtectionManager(
            roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state", ownerStorage: .indexOnly)
        for manager in managers + [third] {
            for index in 0..<20 {
                #expect(try manager.protectionInfo(atPath: f.path("turn-\(index)"))?.owner == owners[index % 2], "turn-\(index)")
            }
            for index in 0..<40 {
                #expect(try manager.protectionInfo(atPath: f.path("race-\(index)"))?.owner == owners[index % 2], "race-\(index)")
            }
        }
    }

    @Test("two file managers on one state directory wipe different accounts at once: the journal loses neither")
    func wipeJournalSharedByTwoManagers() throws {
        let f = try Fixture(ownerStorage: .indexOnly)
        let second = try FileProtectionManager(
            roots: [f.root], keyStore: f.keys, policy: f.policy, stateDirectory: f.directory + "/state", ownerStorage: .indexOnly)
        let journal = WipeJournal(path: f.directory + "/state/wipes.journal")
        let journals = [f.files.storage.journal, second.storage.journal]
        let wipes = LockedValue<[WipeJournal.Running]>([])
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            do {
                let running = try journals[index % 2].begin([Identity("user\(index)@contoso.com")], roots: [f.root])
                wipes.withLock { $0 += running.map { [$0] } ?? [] }
            } catch {
                Issue.record("\(index): \(error)")
            }
        }
        let pending = try journal.pending()
        #expect(pending.count == 64)
        #expect(Set(pending.flatMap(\.accounts)).count == 64)
        #expect(Set(pending.map(\.id)) == Set(wipes.withLock { $0 }.map(\.id)), "two wipes took one entry")
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            let running = wipes.withLock { $0[index] }
            do {
                try journals[index % 2].end(running, completed: true, accounts: [Identity("user\(index)@contoso.com")], roots: [f.root])
            } catch {
                Issue.record("\(index): \(error)")
            }
        }
        #expect(try journal.pending().isEmpty)
    }
}
