import Foundation
import IdentityRuntime

/// The wipes (``FileProtectionManager/removeFiles(ownedBy:)`` and the policy's) that have begun and not
/// completed: `wipes.journal` in the state directory, a JSON document replaced atomically (temporary file,
/// `fsync`, `rename`, `fsync` of the directory), oldest wipe first:
///
/// ```json
/// {"format": 2, "wipes": [{"id": "9f2c44e1a0b3d5c7", "accounts": ["alice@contoso.com"], "roots": ["/srv/data"]}]}
/// ```
///
/// A wipe adds an entry of its own, with the real paths of the roots it walks, before its first file is
/// deleted, and takes it out after the keys are destroyed, only when nothing remained. A crash in between
/// leaves the entry, and the next ``FileProtectionManager`` made on the same state directory finishes that
/// wipe, over its own roots and the entry's, before it returns.
///
/// One entry per wipe: managers that share a state directory (in one process or in several) may wipe one
/// account at once over different roots, and the one that completes first must not take out the entry of
/// another that may still be cut short. While a wipe runs, it holds an exclusive `flock` on `wipe-ID.lock`
/// beside the journal, which the kernel drops when its process ends: an entry whose lock nobody holds belongs to
/// a wipe that ended without completing (it failed, or its process died), and only such an entry is another's
/// to finish. A wipe that completes takes out its own entry and, for its accounts, every older entry that is
/// not running and whose roots it walked: it walked them with the accounts refused, after those wipes had
/// begun. It leaves the entries of wipes still running (which may still be waiting for creations in flight in
/// their own manager), of wipes that began after it, and over roots it did not walk. A start finishes each
/// entry nobody runs, and its wipe takes that entry's place in the journal, so a start that fails again does not
/// add one; a wipe that fails takes the place of the older failed ones it covers whole. A start also removes the
/// lock files no entry names and nobody holds (a process killed between making one and journaling its wipe).
///
/// The first format, `{"format": 1, "accounts": […]}`, is read as one entry with no roots (any wipe of its
/// accounts completes it). A document that is neither, or that the writer cannot have written, is refused:
/// ``ProtectionError/ioFailure(path:operation:errno:)`` (106), with nothing deleted.
struct WipeJournal: Sendable {
    let path: String
    /// Serializes read-modify-write of the file within the process (``StateFileLock`` across managers and
    /// processes sharing the state directory).
    private let lock = LockedValue(())

    /// One wipe that has not completed.
    struct Entry: Codable, Equatable, Sendable {
        /// 16 lowercase hexadecimal digits, random; names the wipe's lock file.
        var id: String
        /// The accounts it has yet to complete, by name.
        var accounts: [String]
        /// The real paths of the roots it walks.
        var roots: [String]
    }

    /// A wipe that has begun: its entry, and the descriptor of its lock file, whose `flock` says it runs.
    struct Running: Sendable {
        let id: String
        fileprivate let lockDescriptor: Int32
    }

    private struct Document: Codable {
        var format: Int
        var wipes: [Entry]?
        /// The first format's accounts.
        var accounts: [String]?
    }

    init(path: String) {
        self.path = path
    }

    /// The wipes that did not complete, oldest first.
    func pending() throws(ProtectionError) -> [Entry] {
        try lock.withLock { (_: inout Void) throws(ProtectionError) -> [Entry] in try read() }
    }

    /// Whether the wipe of `entry` is running now, in this process or another.
    func isRunning(_ entry: Entry) -> Bool {
        isHeld(lockPath(entry.id))
    }

    /// Whether a running wipe holds the lock file at `path`. The probe takes a *shared* lock, which only the
    /// running wipe's exclusive one refuses: two managers probing at once never take each other's probe for a
    /// running wipe. No file there, or anything but a regular file (planted: the state directory is private), is
    /// held by nobody; it is opened without blocking and without following a link, so a FIFO there cannot hang a
    /// start. A probe that fails otherwise (no descriptor left, no lock to be had) answers that the wipe runs:
    /// its entry is then left as it is.
    private func isHeld(_ path: String) -> Bool {
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        } catch .fileNotFound {
            return false
        } catch {
            // A link or a FIFO in its place (O_NOFOLLOW: ELOOP; a FIFO opens) is planted, and held by nobody.
            if case .ioFailure(_, _, ELOOP) = error { return false }
            return true
        }
        defer { POSIX.closeFile(fd) }
        guard let info = try? POSIX.fstatFD(fd, path: path) else { return true }
        guard POSIX.isRegular(info) else { return false }
        // Taken: nobody holds it. (Closing the descriptor releases it again.)
        return flock(fd, LOCK_SH | LOCK_NB) != 0
    }

    /// Removes the lock files that no entry names and nobody holds, last changed at least `minimumAge` seconds
    /// ago: what a process killed between making its lock file and journaling its wipe leaves (the age covers a
    /// wipe between those two steps, whose lock file is not locked yet for an instant).
    func removeAbandonedLocks(olderThan minimumAge: Double = 60) throws(ProtectionError) {
        let directory = Paths.parent(path)
        try lock.withLock { (_: inout Void) throws(ProtectionError) in
            try StateFileLock.withLock(of: path) { () throws(ProtectionError) in
                let named = Set(try read().map { "wipe-\($0.id).lock" })
                let now = Double(time(nil))
                for name in try POSIX.directoryEntries(directory) where name.hasPrefix("wipe-") && name.hasSuffix(".lock") && !named.contains(name) {
                    let candidate = Paths.join(directory, name)
                    guard let info = try POSIX.lstatPath(candidate), POSIX.isRegular(info),
                          now - Double(info.st_mtim.tv_sec) >= minimumAge, !isHeld(candidate)
                    else { continue }
                    do throws(ProtectionError) { try POSIX.unlinkPath(candidate) } catch .fileNotFound {}
                }
            }
        }
    }

    /// Records the start of a wipe of `accounts` over `roots` (real paths), in place of the entry `replaced`
    /// when given (a wipe that finishes it). Hand the result to ``end(_:completed:accounts:roots:)``.
    /// - Returns: `nil` when `replaced` is no longer in the journal (another wipe finished it): nothing began.
    func begin(_ accounts: Set<Identity>, roots: [String], replacing replaced: String? = nil) throws(ProtectionError) -> Running? {
        var generator = SystemRandomNumberGenerator()
        let id = Hex.encode(withUnsafeBytes(of: generator.next() as UInt64) { Array($0) })
        // Locked before the entry exists: whoever reads the entry sees it running.
        let fd = try POSIX.openFile(lockPath(id), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o600)
        let running = Running(id: id, lockDescriptor: fd)
        do throws(ProtectionError) {
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { throw POSIX.failure(lockPath(id), "flock") }
            let began = try update { wipes -> Bool in
                if let replaced {
                    guard let index = wipes.firstIndex(where: { $0.id == replaced }) else { return false }
                    wipes.remove(at: index)
                }
                wipes.append(Entry(id: id, accounts: accounts.map(\.name).sorted(), roots: roots))
                return true
            }
            guard began else {
                release(running, removingLock: true)
                return nil
            }
            // The replaced wipe's lock: nobody holds it (only an entry not running is finished). One that stays
            // is named by no entry, and the next start's sweep removes it.
            if let replaced { try? POSIX.unlinkPath(lockPath(replaced)) }
            return running
        } catch {
            release(running, removingLock: true)
            throw error
        }
    }

    /// Ends the wipe `running`. When it `completed` (nothing of `accounts` remained under `roots`), takes out
    /// its entry and `accounts` from every older entry that is not running and whose roots are among `roots`.
    /// Otherwise its entry stays, for the next wipe or start to finish, and takes the place of the older entries
    /// not running that it covers whole (their accounts and roots are among its own), so wipes that keep
    /// failing leave one entry, not one each.
    func end(_ running: Running, completed: Bool, accounts: Set<Identity>, roots: [String]) throws(ProtectionError) {
        let walked = Set(roots)
        let removed: [String]
        do throws(ProtectionError) {
            removed = try update { wipes -> [String] in
                guard let own = wipes.firstIndex(where: { $0.id == running.id }) else { return [] }
                for index in wipes.indices where index < own {
                    guard Set(wipes[index].roots).isSubset(of: walked), !isRunning(wipes[index]) else { continue }
                    if completed {
                        wipes[index].accounts.removeAll { accounts.contains(Identity($0)) }
                    } else if wipes[index].accounts.allSatisfy({ accounts.contains(Identity($0)) }) {
                        wipes[index].accounts = []
                    }
                }
                if completed { wipes[own].accounts = [] }
                let removed = wipes.filter(\.accounts.isEmpty).map(\.id)
                wipes.removeAll { $0.accounts.isEmpty }
                return removed
            }
        } catch {
            release(running, removingLock: false)
            throw error
        }
        release(running, removingLock: completed)
        // The lock files of the entries taken out; nobody holds them (a wipe's own is gone above). One that
        // stays is named by no entry, and the next start's sweep removes it.
        for id in removed where id != running.id {
            try? POSIX.unlinkPath(lockPath(id))
        }
    }

    /// Ends `running`'s lock (its entry reads as not running from now on) and, with `removingLock`, removes its
    /// file: only once no entry names it. A file that fails to go is named by no entry; the next start's sweep
    /// removes it.
    private func release(_ running: Running, removingLock: Bool) {
        if removingLock { try? POSIX.unlinkPath(lockPath(running.id)) }
        POSIX.closeFile(running.lockDescriptor)
    }

    private func lockPath(_ id: String) -> String {
        Paths.join(Paths.parent(path), "wipe-\(id).lock")
    }

    private func update<Result>(_ change: (inout [Entry]) -> Result) throws(ProtectionError) -> Result {
        try lock.withLock { (_: inout Void) throws(ProtectionError) -> Result in
            try StateFileLock.withLock(of: path) { () throws(ProtectionError) -> Result in
                var wipes = try read()
                let before = wipes
                let result = change(&wipes)
                if wipes != before { try write(wipes) }
                return result
            }
        }
    }

    private func write(_ wipes: [Entry]) throws(ProtectionError) {
        if wipes.isEmpty {
            do throws(ProtectionError) { try POSIX.unlinkPath(path) } catch .fileNotFound {}
            try POSIX.fsyncDirectory(Paths.parent(path))
            return
        }
        guard let data = try? JSONEncoder().encode(Document(format: 2, wipes: wipes)) else {
            throw .ioFailure(path: path, operation: "encode wipe journal", errno: EIO)
        }
        try AtomicFile.write(Array(data), to: path, mode: 0o600)
    }

    private func read() throws(ProtectionError) -> [Entry] {
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY)
        } catch .fileNotFound {
            return []
        }
        defer { POSIX.closeFile(fd) }
        let bytes = try POSIX.readToEnd(fd, path: path)
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(bytes)),
              let wipes = Self.entries(of: document)
        else {
            throw .ioFailure(path: path, operation: "read wipe journal (malformed)", errno: EIO)
        }
        return wipes
    }

    /// The entries of `document`, or `nil` when the writer cannot have written it: an empty journal (the file
    /// is removed instead), an entry with no account or the unmanaged one, a root that is no absolute path, an
    /// id that is not 16 lowercase hexadecimal digits or that repeats, or the fields of both formats.
    private static func entries(of document: Document) -> [Entry]? {
        func isAccount(_ name: String) -> Bool { !Identity(name).isUnmanaged }
        switch (document.format, document.wipes, document.accounts) {
        case (1, nil, let accounts?):
            guard !accounts.isEmpty, accounts.allSatisfy(isAccount) else { return nil }
            // Named by no lock file anyone holds: not running.
            return [Entry(id: String(repeating: "0", count: 16), accounts: accounts, roots: [])]
        case (2, let wipes?, nil):
            let valid = !wipes.isEmpty && Set(wipes.map(\.id)).count == wipes.count && wipes.allSatisfy { entry in
                entry.id.utf8.count == 16 && entry.id.utf8.allSatisfy(Hex.isLowercaseDigit)
                    && !entry.accounts.isEmpty && entry.accounts.allSatisfy(isAccount)
                    && entry.roots.allSatisfy { $0.hasPrefix("/") }
            }
            return valid ? wipes : nil
        default:
            return nil
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
