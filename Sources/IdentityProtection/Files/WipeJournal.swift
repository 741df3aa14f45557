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
    /// Serializes read-modify-write of the file within the process (``StateFileLock`` across managers and
    /// processes sharing the state directory).
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
            try StateFileLock.withLock(of: path) { () throws(ProtectionError) in try update(from: try read(), change) }
        }
    }

    /// One change of the journal, from `accounts` as read under the lock.
    private func update(from accounts: Set<Identity>, _ change: (inout Set<Identity>) -> Void) throws(ProtectionError) {
        var accounts = accounts
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
/// The accounts being removed are marked here too (``beginRemoval(_:)``, before the removal reads its
/// horizon). A creation of what was decrypted with a key fetched before it began (a decryption's plaintext)
/// that finds its owner marked once it holds its ticket is refused: the removal does not wait for it, so it
/// must not write plaintext that the removal's walk may already have passed, whatever the policy says of the
/// account meanwhile (a removal through ``FileProtectionManager/removeFiles(ownedBy:)`` does not block it).
/// Other creations are not asked: the later round of an asynchronous write whose first round was in flight
/// when the removal began is waited for through that round's ticket, and must go on.
///
/// A removal blocks on a condition variable that every ended creation signals: it wakes when the last of its
/// creations ends, with no polling.
final class CreationTracker: Sendable {
    private struct State {
        var nextTicket: UInt64 = 0
        var inFlight: [Identity: Set<UInt64>] = [:]
        /// The accounts whose removal is running, with the number of removals of each.
        var removing: [Identity: Int] = [:]

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

    /// Marks `owners` as being removed, until ``endRemoval(_:)``: decryptions whose creation begins from now on
    /// are refused (``isBeingRemoved(_:)``). Called before the removal reads its horizon (``waitUntilIdle(_:timeout:)``).
    func beginRemoval(_ owners: Set<Identity>) {
        state.withLock { state in
            for owner in owners { state.removing[owner, default: 0] += 1 }
        }
    }

    /// Ends a removal of `owners` that ``beginRemoval(_:)`` marked.
    func endRemoval(_ owners: Set<Identity>) {
        state.withLock { state in
            for owner in owners {
                let count = (state.removing[owner] ?? 1) - 1
                state.removing[owner] = count > 0 ? count : nil
            }
        }
    }

    /// The ticket of the last creation begun so far: creations with a later one begin after this call.
    func horizon() -> UInt64 {
        state.withLock { $0.nextTicket }
    }

    /// The owners of the creations in flight now that began by `horizon` (``horizon()``; `nil`: all of them).
    func ownersInFlight(upTo horizon: UInt64?) -> Set<Identity> {
        state.withLock { state in
            Set(state.inFlight.filter { _, tickets in tickets.contains { $0 <= horizon ?? .max } }.keys)
        }
    }

    /// Whether a removal of `owner` is running: asked by a decryption's creation once it holds its ticket.
    func isBeingRemoved(_ owner: Identity) -> Bool {
        state.withLock { $0.removing[owner] != nil }
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
    ///
    /// - Parameter since: for a creation of what the caller decrypted with a key it fetched before, the
    ///   revocation count (`KeyRevocations.epoch(of:)`) noted before it fetched the key: a wipe of `owner`
    ///   that is running, or ran since, and does not wait for this creation, refuses it.
    /// - Throws: ``ProtectionError/keyNotFound(identity:keyID:)`` (103) with `since`: a removal of `owner`
    ///   is running or ran since; the policy's refusal to create data for `owner`; what `body` throws.
    func creating<Result>(
        for owner: Identity?, since: UInt64? = nil, _ body: () throws(ProtectionError) -> Result
    ) throws(ProtectionError) -> Result {
        guard let owner, !owner.isUnmanaged else {
            return try body()
        }
        let ticket = creations.begin(owner)
        do throws(ProtectionError) {
            try policy.authorizeCreation(for: owner)
            // Asked once the ticket is held: a removal that started earlier does not wait for this creation, and
            // is seen here; one that starts later waits for it, and removes what it creates.
            if let since, creations.isBeingRemoved(owner) || KeyRevocations.shared.wasRevoked(owner, in: keyStore, since: since) {
                throw ProtectionError.keyNotFound(identity: owner, keyID: nil)
            }
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
