import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

@Suite("Atomic writes whose new file cannot take the name leave the destination and the owner index as they were")
struct AtomicInstallFailureTests {
    /// Installs alice's new file at `destination` (replacing `replaced`), running `meanwhile` once its content is
    /// written; returns the outcome and the temporary file's `stat`.
    private func install(
        _ f: Fixture, _ destination: String, replacing replaced: stat?, meanwhile: () -> Void = {}
    ) -> (Result<Bool, ProtectionError>, stat?) {
        var temporary: stat?
        let outcome = Result { () throws(ProtectionError) -> Bool in
            try f.files.installAtomically(destination, mode: 0o600, owner: RecordedOwner(alice, isolated: true), replacing: replaced) {
                output throws(ProtectionError) in
                try output.write(Array("alice's words".utf8))
                temporary = try POSIX.fstatFD(output.fd, path: output.temporaryPath)
                meanwhile()
            }
        }
        return (outcome, temporary)
    }

    /// Puts a directory with an entry at `path`, after removing what is there.
    private func directoryTakes(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
        try? FileManager.default.createDirectory(atPath: path + "/inside", withIntermediateDirectories: true)
    }

    /// The temporary file and its owner record are gone; `destination` is still a directory with its entry.
    private func expectNothingPlaced(_ f: Fixture, _ destination: String, temporary: stat?) throws {
        // The temporary file's inode may be reused by a file nobody owns: its owner record must not outlive it.
        #expect(try f.files.owners.index.entry(of: try #require(temporary)) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root) == ["target"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination) == ["inside"])
    }

    @Test("a rename the file system refuses (over a directory the caller checked): an error; the temporary file and its owner record go", arguments: [OwnerStorage.indexOnly, .automatic])
    func renameRefused(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let destination = f.path("target")
        directoryTakes(destination)
        let replaced = try #require(try POSIX.lstatPath(destination))
        let (outcome, temporary) = install(f, destination, replacing: replaced)
        guard case .failure(.ioFailure) = outcome else {
            Issue.record("expected ioFailure, got \(outcome)")
            return
        }
        try expectNothingPlaced(f, destination, temporary: temporary)
    }

    @Test("the checked file replaced meanwhile (its inode possibly reused): nothing placed (false), the temporary file and its owner record go", arguments: [OwnerStorage.indexOnly, .automatic])
    func checkedFileReplaced(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let destination = f.path("target")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: destination, contents: Data("old".utf8)) }
        // Back-dated, so that what replaces it differs in time even where it gets the same inode.
        #expect(utimes(destination, [timeval(tv_sec: 946_684_800, tv_usec: 0), timeval(tv_sec: 946_684_800, tv_usec: 0)]) == 0)
        let replaced = try #require(try POSIX.lstatPath(destination))
        let (outcome, temporary) = install(f, destination, replacing: replaced) { directoryTakes(destination) }
        guard case .success(false) = outcome else {
            Issue.record("expected false (nothing placed), got \(outcome)")
            return
        }
        try expectNothingPlaced(f, destination, temporary: temporary)
    }

    @Test("a free name taken meanwhile: nothing placed (false), the temporary file and its owner record go", arguments: [OwnerStorage.indexOnly, .automatic])
    func freeNameTaken(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let destination = f.path("target")
        let (outcome, temporary) = install(f, destination, replacing: nil) { directoryTakes(destination) }
        guard case .success(false) = outcome else {
            Issue.record("expected false (nothing placed), got \(outcome)")
            return
        }
        try expectNothingPlaced(f, destination, temporary: temporary)
    }
}

@Suite("Creations in flight as a wipe that refuses new ones counts them")
struct CreationHorizonTests {
    @Test("owners in flight up to a horizon leave out creations begun after it; without one, all; ended creations none")
    func ownersUpToTheHorizon() {
        let tracker = CreationTracker()
        let first = tracker.begin(alice)
        let horizon = tracker.horizon()
        let later = tracker.begin(bob)
        #expect(tracker.ownersInFlight(upTo: horizon) == [alice])
        #expect(tracker.ownersInFlight(upTo: nil) == [alice, bob])
        tracker.end(alice, ticket: first)
        #expect(tracker.ownersInFlight(upTo: horizon).isEmpty)
        tracker.end(bob, ticket: later)
        #expect(tracker.ownersInFlight(upTo: nil).isEmpty)
    }
}
