import Foundation
import IdentityRuntime

/// The wipes (``FileProtectionManager/removeFiles(ownedBy:)`` and the policy's) that have started and not
/// completed: `wipes.journal` in the state directory, a JSON document replaced atomically (temporary file,
/// `fsync`, `rename`, `fsync` of the directory):
///
/// ```json
/// {"format": 2, "next": 8, "wipes": [{"id": 7, "accounts": ["alice@contoso.com"], "roots": ["/srv/data"]}]}
/// ```
///
/// A wipe adds an entry of its own, with the roots it walks, before its first file is deleted, and takes it
/// out after the keys are destroyed, only when nothing remained. A crash in between leaves the entry, and the
/// next ``FileProtectionManager`` made on the same state directory finishes that wipe, over its own roots and
/// the entry's, before it returns.
///
/// One entry per wipe, not one per account: managers that share a state directory (in one process or in
/// several) may wipe one account at once over different roots, and the one that completes first must not
/// take out the entry of another that a crash may still cut short. A wipe that completes takes out, for its
/// accounts, its own entry and every *older* one whose roots it walked: it walked them with the accounts
/// refused after those wipes had started, so what they had left to do is done. It leaves the entries of
/// wipes that began after it did, and those over roots it did not walk.
///
/// The first format, `{"format": 1, "accounts": […]}`, is read as one entry with no roots (any wipe of its
/// accounts completes it).
struct WipeJournal: Sendable {
    let path: String
    /// Serializes read-modify-write of the file within the process (``StateFileLock`` across managers and
    /// processes sharing the state directory).
    private let lock = LockedValue(())

    /// One wipe that has not completed.
    struct Entry: Codable, Equatable, Sendable {
        /// Increasing in the order the wipes began, across every manager on the state directory.
        var id: UInt64
        /// The accounts it has yet to complete, by name, sorted.
        var accounts: [String]
        /// The roots it walks, as registered (absolute paths, links unresolved).
        var roots: [String]
    }

    private struct Document: Codable {
        var format: Int
        var next: UInt64?
        var wipes: [Entry]?
        /// The first format's accounts.
        var accounts: [String]?
    }

    init(path: String) {
        self.path = path
    }

    /// The wipes that did not complete, oldest first.
    func pending() throws(ProtectionError) -> [Entry] {
        try lock.withLock { (_: inout Void) throws(ProtectionError) -> [Entry] in try read().wipes }
    }

    /// Records the start of a wipe of `accounts` over `roots`.
    /// - Returns: the wipe's entry, for ``complete(_:accounts:roots:)``.
    func begin(_ accounts: Set<Identity>, roots: [String]) throws(ProtectionError) -> UInt64 {
        try update { journal in
            let id = journal.next
            journal.next += 1
            journal.wipes.append(Entry(id: id, accounts: accounts.map(\.name).sorted(), roots: roots))
            return id
        }
    }

    /// Records that the wipe `id` of `accounts` over `roots` completed: takes `accounts` out of its entry and
    /// of every older one whose roots are among `roots`, and drops the entries left with no account.
    func complete(_ id: UInt64, accounts: Set<Identity>, roots: [String]) throws(ProtectionError) {
        let names = Set(accounts.map(\.name))
        let walked = Set(roots)
        try update { journal in
            for index in journal.wipes.indices where journal.wipes[index].id <= id {
                guard Set(journal.wipes[index].roots).isSubset(of: walked) else { continue }
                journal.wipes[index].accounts.removeAll { names.contains($0) }
            }
            journal.wipes.removeAll { $0.accounts.isEmpty }
        }
    }

    /// The journal as read: the entries, and the id the next wipe takes.
    private struct Contents: Equatable {
        var next: UInt64 = 1
        var wipes: [Entry] = []
    }

    private func update<Result>(_ change: (inout Contents) -> Result) throws(ProtectionError) -> Result {
        try lock.withLock { (_: inout Void) throws(ProtectionError) -> Result in
            try StateFileLock.withLock(of: path) { () throws(ProtectionError) -> Result in
                var contents = try read()
                let before = contents
                let result = change(&contents)
                if contents != before { try write(contents) }
                return result
            }
        }
    }

    private func write(_ contents: Contents) throws(ProtectionError) {
        if contents.wipes.isEmpty {
            do throws(ProtectionError) { try POSIX.unlinkPath(path) } catch .fileNotFound {}
            try POSIX.fsyncDirectory(Paths.parent(path))
            return
        }
        let document = Document(format: 2, next: contents.next, wipes: contents.wipes)
        guard let data = try? JSONEncoder().encode(document) else {
            throw .ioFailure(path: path, operation: "encode wipe journal", errno: EIO)
        }
        try AtomicFile.write(Array(data), to: path, mode: 0o600)
    }

    private func read() throws(ProtectionError) -> Contents {
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY)
        } catch .fileNotFound {
            return Contents()
        }
        defer { POSIX.closeFile(fd) }
        let bytes = try POSIX.readToEnd(fd, path: path)
        let malformed = ProtectionError.ioFailure(path: path, operation: "read wipe journal (malformed)", errno: EIO)
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(bytes)) else { throw malformed }
        switch (document.format, document.next, document.wipes, document.accounts) {
        case (1, _, _, let accounts?):
            return Contents(next: 1, wipes: accounts.isEmpty ? [] : [Entry(id: 0, accounts: accounts.sorted(), roots: [])])
        case (2, let next?, let wipes?, nil) where wipes.allSatisfy({ $0.id < next }):
            return Contents(next: next, wipes: wipes)
        default:
            throw malformed
        }
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
