import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

@Suite("Atomic writes whose new file cannot take the name leave the destination and the owner index as they were")
struct AtomicInstallFailureTests {
    /// Installs alice's new file at `destination` (replacing `replaced`), while its body puts a directory with an
    /// entry at that name; returns the outcome and the temporary file's `stat`.
    private func installWhileADirectoryTakesTheName(
        _ f: Fixture, _ destination: String, replacing replaced: stat?
    ) -> (Result<Bool, ProtectionError>, stat?) {
        var temporary: stat?
        let outcome = Result { () throws(ProtectionError) -> Bool in
            try f.files.installAtomically(destination, mode: 0o600, owner: RecordedOwner(alice, isolated: true), replacing: replaced) {
                output throws(ProtectionError) in
                try output.write(Array("alice's words".utf8))
                temporary = try POSIX.fstatFD(output.fd, path: output.temporaryPath)
                try? FileManager.default.removeItem(atPath: destination)
                try? FileManager.default.createDirectory(atPath: destination + "/inside", withIntermediateDirectories: true)
            }
        }
        return (outcome, temporary)
    }

    @Test("a rename refused by what took the name meanwhile: an error; the temporary file and its owner record go", arguments: [OwnerStorage.indexOnly, .automatic])
    func renameRefused(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let destination = f.path("target")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: destination, contents: Data("old".utf8)) }
        let replaced = try #require(try POSIX.lstatPath(destination))
        let (outcome, temporary) = installWhileADirectoryTakesTheName(f, destination, replacing: replaced)
        guard case .failure(.ioFailure) = outcome else {
            Issue.record("expected ioFailure, got \(outcome)")
            return
        }
        // The temporary file's inode may be reused by a file nobody owns: its owner record must not outlive it.
        #expect(try f.files.owners.index.entry(of: try #require(temporary)) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root) == ["target"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination) == ["inside"])
    }

    @Test("a free name taken meanwhile: nothing placed (false), the temporary file and its owner record go", arguments: [OwnerStorage.indexOnly, .automatic])
    func freeNameTaken(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage)
        let destination = f.path("target")
        let (outcome, temporary) = installWhileADirectoryTakesTheName(f, destination, replacing: nil)
        guard case .success(false) = outcome else {
            Issue.record("expected false (nothing placed), got \(outcome)")
            return
        }
        #expect(try f.files.owners.index.entry(of: try #require(temporary)) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root) == ["target"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination) == ["inside"])
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
