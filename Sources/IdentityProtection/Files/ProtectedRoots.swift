import Dispatch
import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a ``FileProtectionManager`` keeps apart from its policy: the protected roots, the key store, the state
/// directory with its owner store and wipe journal, and the creations in flight; and the wipe, which needs
/// nothing else (it is decided before it reaches this type).
///
/// A policy manager's selective wipe holds this part of a file manager, never the file manager itself, so a
/// file manager whose policy is that policy manager (directly or through any wrapper) makes no reference
/// cycle, and a wipe reaches the files and keys for as long as the policy manager lives.
package final class ProtectedRoots: Sendable {
    /// Where keys come from.
    package let keyStore: any KeyStore
    /// The real path of the state directory.
    package let stateDirectory: String
    /// The runtime's own directories (real paths), never read or written through the file APIs: the state
    /// directory and the key store's ``KeyStore/keyDirectories``; the directories of every `FileKeyStore` in
    /// the process are reserved as well (``isReserved(_:)``).
    let reservedDirectories: [String]
    let owners: FileOwnerStore
    let journal: WipeJournal
    let creations = CreationTracker()
    private let registeredRoots: LockedValue<[String]>
    /// Tests only: a failure to report instead of listing a directory (`"list"`) or removing a file
    /// (`"unlink"`) at a path. Running as root, a test cannot make the file system refuse, so it makes the walk
    /// meet the refusal here.
    private let faults = LockedValue<(@Sendable (_ operation: String, _ path: String) -> ProtectionError?)?>(nil)

    /// Tests only: from now on `fault` may fail a wipe's directory listing (`"list"`) or file removal
    /// (`"unlink"`) at a path (`nil` from it: no fault); `nil` ends it.
    package func injectFaults(_ fault: (@Sendable (_ operation: String, _ path: String) -> ProtectionError?)?) {
        faults.withLock { $0 = fault }
    }

    private func fault(_ operation: String, _ path: String) throws(ProtectionError) {
        if let error = faults.withLock({ $0 })?(operation, path) { throw error }
    }

    /// Roots over `stateDirectory` (a real path, made private by the caller), finishing a wipe a crash cut
    /// short there before it returns.
    init(roots: [String], keyStore: any KeyStore, stateDirectory: String, ownerStorage: OwnerStorage) throws(ProtectionError) {
        self.keyStore = keyStore
        self.stateDirectory = stateDirectory
        self.owners = FileOwnerStore(storage: ownerStorage, index: OwnerIndex(path: Paths.join(stateDirectory, "owners.index")))
        self.journal = WipeJournal(path: Paths.join(stateDirectory, "wipes.journal"))
        self.registeredRoots = LockedValue(roots.map(Paths.absolute))
        // Resolved as the paths they are compared with are, so that a link to a key directory names it too.
        self.reservedDirectories = [stateDirectory] + keyStore.keyDirectories.map { directory in
            let absolute = Paths.absolute(directory)
            return POSIX.realPath(absolute) ?? absolute
        }
        try finishInterruptedRemovals()
    }

    /// Whether `resolved` (absolute, links resolved) is or lies in one of the runtime's own directories: the
    /// ``reservedDirectories``, or the directory of any `FileKeyStore` of the process, which a store that
    /// wraps one reaches without saying so.
    func isReserved(_ resolved: String) -> Bool {
        reservedDirectories.contains { Paths.isWithin(resolved, root: $0) } || KeyDirectories.shared.contains(resolved)
    }

    /// The protected roots (absolute paths).
    package var roots: [String] {
        registeredRoots.withLock { $0 }
    }

    /// Adds a protected root (absolute path).
    func addRoot(_ absolute: String) {
        registeredRoots.withLock { roots in
            if !roots.contains(absolute) { roots.append(absolute) }
        }
    }
}

extension ProtectedRoots {
    /// The removal of `FileProtectionManager.removeFiles(ownedByAnyOf:)` without asking a policy: for the
    /// policy's own wipe (`PolicyManager`, which decided it and has blocked the accounts) and for finishing a
    /// wipe that a crash interrupted (it was allowed when it started).
    package func removeFilesAsPolicy(ownedByAnyOf accounts: Set<Identity>) throws(ProtectionError) -> [Identity: [String]] {
        let outcome = try wipeAsPolicy(ownedByAnyOf: accounts)
        if let error = outcome.error { throw error }
        return outcome.removed
    }

    /// ``removeFilesAsPolicy(ownedByAnyOf:)`` with everything it could not remove reported rather than
    /// thrown.
    /// - Throws: only when the wipe could not start (its journal could not be written): then nothing was
    ///   removed.
    package func wipeAsPolicy(ownedByAnyOf accounts: Set<Identity>) throws(ProtectionError) -> FileWipeOutcome {
        try wipeAsPolicy(ownedByAnyOf: accounts, finishing: nil)
    }

    /// ``wipeAsPolicy(ownedByAnyOf:)``, also over the roots of `interrupted` (a wipe that did not complete and
    /// is not running), in place of it: nothing when another wipe finished it meanwhile.
    private func wipeAsPolicy(ownedByAnyOf accounts: Set<Identity>, finishing interrupted: WipeJournal.Entry?) throws(ProtectionError) -> FileWipeOutcome {
        guard var wipe = try startWipe(of: accounts, finishing: interrupted) else { return FileWipeOutcome() }
        for account in wipe.accounts {
            do throws(ProtectionError) { try keyStore.destroyKeys(for: account) } catch { wipe.note(error, keysOf: account) }
        }
        return finishWipe(wipe)
    }

    /// `removeFilesAsPolicy(ownedByAnyOf:)` with the keys destroyed through the key store's asynchronous
    /// requirement, answered by `deadline`.
    package func removeFilesAsPolicy(
        ownedByAnyOf accounts: Set<Identity>, keysBy deadline: ContinuousClock.Instant
    ) async throws(ProtectionError) -> [Identity: [String]] {
        // The file part waits for creations in flight, some of which may be asynchronous operations awaiting a
        // key on the cooperative pool, and walks the roots: on a GCD thread, never holding a cooperative one.
        let started = await withCheckedContinuation { (continuation: CheckedContinuation<Result<WipeRun?, ProtectionError>, Never>) in
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(returning: Result { () throws(ProtectionError) in try self.startWipe(of: accounts, finishing: nil) })
            }
        }
        guard var wipe = try started.get() else { return [:] }
        for account in wipe.accounts {
            do throws(ProtectionError) { try await keyStore.destroyKeys(for: account, deadline: deadline) } catch { wipe.note(error, keysOf: account) }
        }
        let outcome = finishWipe(wipe)
        if let error = outcome.error { throw error }
        return outcome.removed
    }

    /// A wipe between its file part and its end: its journal entry, the roots it walked (real paths), the
    /// accounts (sorted), what was removed, what was not.
    struct WipeRun: Sendable {
        let journalEntry: WipeJournal.Running
        let roots: [String]
        var accounts: [Identity]
        var removed: [Identity: [String]] = [:]
        var leftovers: [WipeLeftover] = []
        var keyFailures: [Identity: ProtectionError] = [:]
        var firstError: ProtectionError?

        /// A failure that left nothing at a known path (the journal could not be updated).
        mutating func note(_ error: ProtectionError) {
            if firstError == nil { firstError = error }
        }

        /// The key store did not destroy `account`'s keys.
        mutating func note(_ error: ProtectionError, keysOf account: Identity) {
            note(error)
            keyFailures[account] = error
        }

        /// Something at `path` the wipe could not remove or could not look into; `owner` when known.
        mutating func note(_ error: ProtectionError, at path: String, owner: Identity? = nil) {
            note(error)
            leftovers.append(WipeLeftover(path: path, owner: owner, error: error))
        }
    }

    /// The file part of a wipe over the protected roots (and those of `interrupted`, in place of it): journals
    /// the wipe, waits for the accounts' creations in flight, deletes their files and forgets their directories'
    /// ownership. `nil` when there is no account to wipe, or `interrupted` was finished meanwhile.
    private func startWipe(of accounts: Set<Identity>, finishing interrupted: WipeJournal.Entry?) throws(ProtectionError) -> WipeRun? {
        let accounts = accounts.filter { !$0.isUnmanaged }
        guard !accounts.isEmpty else { return nil }
        // The roots as they are now, as the walk resolves them: a root added while the wipe runs is not walked,
        // so it is not recorded, and a root named through a link is the directory the link names now.
        var walked: [String] = []
        for root in roots.map({ POSIX.realPath($0) ?? $0 }) + (interrupted?.roots ?? []) where !walked.contains(root) {
            walked.append(root)
        }
        guard let entry = try journal.begin(accounts, roots: walked, replacing: interrupted?.id) else { return nil }
        // Open handles on the accounts' data stop now, before a file or a key goes (and again at the end, for
        // handles opened meanwhile).
        for account in accounts { KeyRevocations.shared.revoke(account, in: keyStore) }
        // Decryptions whose creation begins from here on are refused; creations that began before are waited for.
        creations.beginRemoval(accounts)
        creations.waitUntilIdle(accounts)
        var wipe = WipeRun(journalEntry: entry, roots: walked, accounts: accounts.sorted { $0.foldedName < $1.foldedName })
        var forgotten: [stat] = []
        walkRoots(over: walked, directory: { path, info in
            do throws(ProtectionError) {
                guard let owner = try owners.owner(path: path, info: info), accounts.contains(owner) else { return }
                try owners.setOwner(.unowned, path: path)
            } catch {
                // An owner record that does not name an account is no owner of these accounts.
                if case .invalidIdentity = error { return }
                wipe.note(error, at: path)
            }
        }) { path, info in
            var owner: Identity?
            do throws(ProtectionError) {
                owner = try self.owner(forWipeOf: path, info: info)
                guard let owner, accounts.contains(owner) else { return }
                try fault("unlink", path)
                try POSIX.unlinkPath(path)
                wipe.removed[owner, default: []].append(path)
                forgotten.append(info)
            } catch {
                // Gone since the directory was read: nothing of it remains.
                if case .fileNotFound = error { return }
                wipe.note(error, at: path, owner: owner)
            }
        } onError: { path, error in
            wipe.note(error, at: path)
        }
        for directory in Set(wipe.removed.values.joined().map(Paths.parent)) {
            do throws(ProtectionError) { try POSIX.fsyncDirectory(directory) } catch {
                wipe.note(error, at: directory)
            }
        }
        do throws(ProtectionError) { try owners.forget(forgotten) } catch {
            wipe.note(error)
        }
        return wipe
    }

    /// The end of a wipe, once the keys are destroyed: handles opened meanwhile stop too, and the wipe is
    /// completed in the journal, unless something remains (a file it could not remove, a directory it could
    /// not read, keys not destroyed): then its entry stays, and the next wipe of its accounts over its roots,
    /// or the next start, tries again.
    private func finishWipe(_ wipe: WipeRun) -> FileWipeOutcome {
        var wipe = wipe
        for account in wipe.accounts { KeyRevocations.shared.revoke(account, in: keyStore) }
        creations.endRemoval(Set(wipe.accounts))
        do throws(ProtectionError) {
            try journal.end(wipe.journalEntry, completed: wipe.firstError == nil, accounts: Set(wipe.accounts), roots: wipe.roots)
        } catch {
            wipe.note(error)
        }
        return FileWipeOutcome(
            removed: wipe.removed.mapValues { $0.sorted() },
            leftovers: wipe.leftovers.sorted { $0.path < $1.path }, keyFailures: wipe.keyFailures, error: wipe.firstError)
    }

    /// Every owner of a regular file under the protected roots (symbolic links are not followed).
    /// - Throws: the first failure to read a directory or an owner.
    package func ownersUnderRoots() throws(ProtectionError) -> Set<Identity> {
        let (found, unreadable) = ownersUnderRootsReporting()
        if let first = unreadable.first { throw first.error }
        return found
    }

    /// The ticket of the last creation begun so far (see ``ownersOfCreationsInFlight(upTo:)``).
    package func creationHorizon() -> UInt64 {
        creations.horizon()
    }

    /// The owners of the creations in flight now that began by `horizon` (``creationHorizon()``; `nil`: all):
    /// files that passed their access check (or are about to ask it) and may not be under the roots yet. A
    /// wipe that finds its accounts by their files takes these too, once it refuses new creations for them,
    /// so that it waits for those files and removes them; the horizon read once it refuses leaves out the
    /// creations that began later, which its refusal stops.
    package func ownersOfCreationsInFlight(upTo horizon: UInt64?) -> Set<Identity> {
        creations.ownersInFlight(upTo: horizon)
    }

    /// Every owner of a regular file under the protected roots that could be read, and every entry that
    /// could not be (a directory it could not list, a file whose owner it could not read): the walk goes on
    /// past each.
    ///
    /// - Parameter includingDirectories: the owners of directories (``FileProtectionManager/protectDirectory(atPath:owner:)``)
    ///   too: a search for the accounts a wipe must reach, which clears them.
    package func ownersUnderRootsReporting(includingDirectories: Bool = false) -> (owners: Set<Identity>, unreadable: [WipeLeftover]) {
        var found = Set<Identity>()
        var unreadable: [WipeLeftover] = []
        walkRoots(directory: { path, info in
            guard includingDirectories else { return }
            do throws(ProtectionError) {
                if let owner = try owners.owner(path: path, info: info) { found.insert(owner) }
            } catch {
                // An owner record that does not name an account is no account's; a directory gone has none.
                if case .invalidIdentity = error { return }
                if case .fileNotFound = error { return }
                unreadable.append(WipeLeftover(path: path, owner: nil, error: error))
            }
        }) { path, info in
            do throws(ProtectionError) {
                if let owner = try owner(forWipeOf: path, info: info) { found.insert(owner) }
            } catch {
                // Gone since the directory was read: it has no owner any more.
                if case .fileNotFound = error { return }
                unreadable.append(WipeLeftover(path: path, owner: nil, error: error))
            }
        } onError: { path, error in
            unreadable.append(WipeLeftover(path: path, owner: nil, error: error))
        }
        return (found, unreadable)
    }

    /// The identities the key store holds keys of (see `KeyStore.listingReportingFailure()`).
    package func identitiesWithKeysReporting() -> KeyListing {
        keyStore.listingReportingFailure()
    }

    /// Deletes the temporary files (`.NAME.idp-RANDOM.tmp`) that atomic writes of a killed process left under
    /// the protected roots and in the state directory, and forgets their recorded owners. Call it at start,
    /// after a crash; the targets of those writes were never touched (they hold the old content).
    ///
    /// A temporary file still being written, by this process or another one sharing the roots, is left alone:
    /// its writer holds an exclusive `flock` on it until it renames it, and only files nobody holds that lock
    /// on and that were last modified at least `minimumAge` seconds ago are deleted (the age covers the moment
    /// between a writer creating its file and locking it). Symbolic links are not followed.
    /// - Parameter minimumAge: seconds since a temporary file's last change before it counts as abandoned; `0`:
    ///   any age (the lock still protects a file being written).
    /// - Returns: the absolute paths deleted, sorted.
    /// - Throws: the first failure to read a directory or delete a file, after everything else was done.
    @discardableResult
    package func removeInterruptedWrites(olderThan minimumAge: Double = 60) throws(ProtectionError) -> [String] {
        var removed: [String] = []
        var forgotten: [stat] = []
        var firstError: ProtectionError?
        let now = Double(time(nil))
        func sweep(_ path: String, _ info: stat) {
            guard AtomicFile.isTemporaryName(Paths.lastComponent(path)) else { return }
            // `olderThan: 0` means any age. (Compared in whole seconds, a file written a moment ago can look one
            // second younger than "now": its fine-grained modification time may run ahead of `time()`.)
            guard minimumAge <= 0 || now - Double(info.st_mtim.tv_sec) >= minimumAge else { return }
            do throws(ProtectionError) {
                let fd = try POSIX.openFile(path, O_RDONLY | O_NOFOLLOW)
                defer { POSIX.closeFile(fd) }
                // A writer holds the lock until its rename: taking it means nobody is writing this file.
                guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return }
                try POSIX.unlinkPath(path)
                removed.append(path)
                // A temporary name that is also another name of its file (a new file placed by `link(2)`
                // whose temporary name a crash left): the file lives on, and so does its owner record.
                if info.st_nlink <= 1 { forgotten.append(info) }
            } catch {
                if case .fileNotFound = error { return }
                if firstError == nil { firstError = error }
            }
        }
        walkRoots(sweep) { _, error in
            if firstError == nil { firstError = error }
        }
        do throws(ProtectionError) {
            for name in try POSIX.directoryEntries(stateDirectory) {
                let path = Paths.join(stateDirectory, name)
                if let info = try POSIX.lstatPath(path), POSIX.isRegular(info) { sweep(path, info) }
            }
        } catch {
            if firstError == nil { firstError = error }
        }
        do throws(ProtectionError) { try owners.forget(forgotten) } catch {
            if firstError == nil { firstError = error }
        }
        if let firstError { throw firstError }
        return removed.sorted()
    }

    /// Finishes the wipes a crash cut short or that failed (see `FileProtectionManager.removeFiles(ownedBy:)`),
    /// oldest first, each over the protected roots and the roots it had, in its place in the journal. Wipes
    /// running meanwhile (another manager's on this state directory) are theirs to finish; an entry another
    /// wipe finished meanwhile is skipped.
    func finishInterruptedRemovals() throws(ProtectionError) {
        try journal.removeAbandonedLocks()
        for entry in try journal.pending() where !journal.isRunning(entry) {
            let outcome = try wipeAsPolicy(ownedByAnyOf: Set(entry.accounts.map { Identity($0) }), finishing: entry)
            if let error = outcome.error { throw error }
        }
    }

    /// Walks `roots` (by default the protected roots).
    private func walkRoots(
        over roots: [String]? = nil,
        directory visitDirectory: (String, stat) -> Void = { _, _ in },
        _ visit: (String, stat) -> Void, onError: (_ path: String, _ error: ProtectionError) -> Void
    ) {
        var visited = Set<String>()
        for root in roots ?? self.roots {
            // A root given as a symbolic link to a directory is that directory, as the file calls resolve it
            // (links further down are not followed: they lead out of the roots). Walked unresolved, the walk's
            // lstat saw a link, not a directory, and a wipe passed over every file under it.
            walk(POSIX.realPath(root) ?? root, visited: &visited, directory: visitDirectory, visit, onError: onError)
        }
    }

    private func owner(forWipeOf path: String, info: stat) throws(ProtectionError) -> Identity? {
        do throws(ProtectionError) {
            if let owner = try owners.owner(path: path, info: info) { return owner }
        } catch .invalidIdentity {
            // An unreadable recorded owner is no owner; fall through to the header.
        }
        do throws(ProtectionError) {
            return try EncryptedFileFormat.header(atPath: path)?.owner
        } catch {
            if case .ioFailure = error { throw error }
            // A header that does not parse names no owner and no key: nothing reads its content, and the
            // owner's keys are destroyed by the wipe either way. A file that cannot be read is reported above.
            return nil
        }
    }

    /// Visits every directory (with `visitDirectory`) and every regular file (with `visit`) under `directory`,
    /// not following symbolic links, not entering the state directory.
    private func walk(
        _ directory: String, visited: inout Set<String>, directory visitDirectory: (String, stat) -> Void,
        _ visit: (String, stat) -> Void, onError: (_ path: String, _ error: ProtectionError) -> Void
    ) {
        guard !visited.contains(directory), directory != stateDirectory else { return }
        visited.insert(directory)
        let names: [String]
        do throws(ProtectionError) {
            guard let info = try POSIX.lstatPath(directory), POSIX.isDirectory(info) else { return }
            visitDirectory(directory, info)
            try fault("list", directory)
            names = try POSIX.directoryEntries(directory)
        } catch {
            return onError(directory, error)
        }
        for name in names.sorted() {
            let path = Paths.join(directory, name)
            do throws(ProtectionError) {
                guard let info = try POSIX.lstatPath(path) else { continue }
                if POSIX.isDirectory(info) {
                    walk(path, visited: &visited, directory: visitDirectory, visit, onError: onError)
                } else if POSIX.isRegular(info) {
                    visit(path, info)
                }
            } catch {
                onError(path, error)
            }
        }
    }
}
