import Foundation
import IdentityRuntime

/// The accounts whose removal (``FileProtectionManager/removeFiles(ownedBy:)``) has started and not finished:
/// `wipes.journal` in the state directory, a JSON document `{"format": 1, "accounts": ["…", …]}` replaced
/// atomically (temporary file, `fsync`, `rename`, `fsync` of the directory).
///
/// An account is written to the journal before its first file is deleted and taken out after its keys are
/// destroyed, so a crash in between leaves it in the journal, and the next ``FileProtectionManager`` made on
/// the same state directory finishes the removal before it returns.
struct WipeJournal: Sendable {
    let path: String
    /// Serializes read-modify-write of the file within the process.
    private let lock = LockedValue(())

    private struct Document: Codable {
        var format: Int
        var accounts: [String]
    }

    init(path: String) {
        self.path = path
    }

    /// The accounts whose removal did not finish.
    func pending() throws(ProtectionError) -> Set<Identity> {
        try lock.withLock { (_: inout Void) throws(ProtectionError) -> Set<Identity> in try read() }
    }

    func add(_ accounts: Set<Identity>) throws(ProtectionError) {
        try update { $0.formUnion(accounts) }
    }

    func remove(_ accounts: Set<Identity>) throws(ProtectionError) {
        try update { $0.subtract(accounts) }
    }

    private func update(_ change: (inout Set<Identity>) -> Void) throws(ProtectionError) {
        try lock.withLock { (_: inout Void) throws(ProtectionError) in
            var accounts = try read()
            let before = accounts
            change(&accounts)
            guard accounts != before else { return }
            if accounts.isEmpty {
                do throws(ProtectionError) { try POSIX.unlinkPath(path) } catch .fileNotFound {}
                try POSIX.fsyncDirectory(Paths.parent(path))
                return
            }
            let document = Document(format: 1, accounts: accounts.map(\.name).sorted())
            guard let data = try? JSONEncoder().encode(document) else {
                throw .ioFailure(path: path, operation: "encode wipe journal", errno: EIO)
            }
            try AtomicFile.write(Array(data), to: path, mode: 0o600)
        }
    }

    private func read() throws(ProtectionError) -> Set<Identity> {
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY)
        } catch .fileNotFound {
            return []
        }
        defer { POSIX.closeFile(fd) }
        let bytes = try POSIX.readToEnd(fd, path: path)
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(bytes)), document.format == 1 else {
            throw .ioFailure(path: path, operation: "read wipe journal (malformed)", errno: EIO)
        }
        return Set(document.accounts.map { Identity($0) })
    }
}

/// The creations of owned files in flight, per owner, so that a removal waits for those that passed the
/// access check before it started.
///
/// A creation takes a ticket *before* its access check, so that either the check sees the account refused
/// (its removal has started: nothing is created), or the removal sees the ticket and waits until that
/// creation has finished, and then deletes what it created. A removal waits only for tickets taken before it
/// began: creations that start later run their check after the account was refused, so writers that keep
/// trying cannot starve it.
///
/// A removal blocks on a condition variable that every ended creation signals: it wakes when the last of its
/// creations ends, with no polling.
final class CreationTracker: Sendable {
    private struct State {
        var nextTicket: UInt64 = 0
        var inFlight: [Identity: Set<UInt64>] = [:]

        /// Whether a creation for one of `owners` with a ticket up to `horizon` is in flight.
        func isBusy(_ owners: Set<Identity>, upTo horizon: UInt64) -> Bool {
            owners.contains { owner in inFlight[owner]?.contains { $0 <= horizon } == true }
        }
    }

    private let state = LockedCondition(State())

    /// Registers a creation for `owner`; pass the ticket to ``end(_:ticket:)``.
    func begin(_ owner: Identity) -> UInt64 {
        state.withLock { state in
            state.nextTicket += 1
            state.inFlight[owner, default: []].insert(state.nextTicket)
            return state.nextTicket
        }
    }

    /// Ends the creation `ticket` of `owner` and wakes the removals waiting, which check whether it was the
    /// last one they wait for.
    func end(_ owner: Identity, ticket: UInt64) {
        state.withLockWakingWaiters { state in
            state.inFlight[owner]?.remove(ticket)
            if state.inFlight[owner]?.isEmpty == true { state.inFlight[owner] = nil }
        }
    }

    /// Returns once every creation for any of `owners` that began before this call has finished, or once
    /// `timeout` has passed (no timeout: it waits as long as they run).
    /// - Returns: `false` when the timeout passed with one of those creations still in flight.
    @discardableResult
    func waitUntilIdle(_ owners: Set<Identity>, timeout: Duration? = nil) -> Bool {
        // Creations that begin after this read have later tickets: the wait is not for them.
        let horizon = state.withLock { $0.nextTicket }
        return state.withLock(waitingUntil: { !$0.isBusy(owners, upTo: horizon) }, timeout: timeout) { state in
            !state.isBusy(owners, upTo: horizon)
        }
    }
}

extension FileProtectionManager {
    /// Runs `body`, which creates a file owned by `owner` (or makes `owner` a file's owner), after the access
    /// check, counted as a creation in flight (see ``CreationTracker``).
    func creating<Result>(
        for owner: Identity?, _ body: () throws(ProtectionError) -> Result
    ) throws(ProtectionError) -> Result {
        guard let owner, !owner.isUnmanaged else {
            return try body()
        }
        let ticket = creations.begin(owner)
        do throws(ProtectionError) {
            try policy.authorizeCreation(for: owner)
            let result = try body()
            creations.end(owner, ticket: ticket)
            return result
        } catch {
            // A round of an asynchronous entry point that stopped to await a key keeps its creation in flight
            // until the run ends, so that a removal starting meanwhile waits for the next round's file too.
            let creations = self.creations
            if !StoreBridge.holdUntilRunEnds({ creations.end(owner, ticket: ticket) }) {
                creations.end(owner, ticket: ticket)
            }
            throw error
        }
    }
}
