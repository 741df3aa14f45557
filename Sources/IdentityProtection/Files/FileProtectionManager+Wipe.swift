import Dispatch
import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension FileProtectionManager {
    /// The selective wipe: deletes every regular file under the protected roots owned by `identity`, then
    /// destroys the identity's keys, so protected data and copies of encrypted files elsewhere become
    /// unreadable too.
    ///
    /// Files owned by anyone else, unowned files, directories and symbolic links are not deleted; symbolic
    /// links are not followed, neither to files nor to directories, so nothing outside the roots is deleted.
    /// Directories owned by `identity` (``protectDirectory(atPath:owner:)``) lose their owner, so nothing created
    /// in them later is owned by the wiped account. An owner is the recorded owner, or for an encrypted file
    /// without one, the owner in its header. Deletion goes on past a failure; the keys are destroyed in any
    /// case.
    ///
    /// Writers racing the wipe: the removal first waits for every creation for `identity` that had passed
    /// the access check (``ManagedIdentityPolicy/refusal(of:to:)``), then deletes. A policy that refuses
    /// ``ProtectedDataAccess/create`` for the account from the start of the wipe (as `PolicyManager` does)
    /// makes sure that no file of it remains afterwards, whatever other threads kept doing.
    ///
    /// Crashes: the account is written to `wipes.journal` in the state directory before anything is deleted
    /// and removed from it at the end, so a wipe cut short by a crash is finished by the next
    /// ``FileProtectionManager`` made on the same state directory, before its initializer returns.
    ///
    /// Access: deleting an account's files and keys is a modification of its data, asked of the policy
    /// (``ProtectedDataAccess/modify(writer:)``) for the caller's `IdentityContext.effectiveFileIdentity`
    /// before anything is deleted: under isolation an account removes its own files, and code with no identity,
    /// `""` or another tenant's account gets the policy's refusal. The administrative wipe of a managed account
    /// is `PolicyManager.wipeData(forAccount:)`, which blocks the account first and then removes its files as
    /// the policy that decided it.
    /// - Returns: the absolute paths deleted, sorted.
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) for the unmanaged identity (it is not an account); the policy's refusal
    ///   (``ProtectionError/accessDenied(identity:reader:)`` (108), ``ProtectionError/accountBlocked(identity:reason:)`` (109),
    ///   ``ProtectionError/policyUnavailable(reason:)`` (115)),
    ///   with nothing deleted; otherwise the first failure, after everything else was done.
    @discardableResult
    public func removeFiles(ownedBy identity: Identity) throws(ProtectionError) -> [String] {
        guard !identity.isUnmanaged else {
            throw .invalidIdentity(reason: "the unmanaged identity is not an account; nothing is wiped for it")
        }
        return try removeFiles(ownedByAnyOf: [identity])[identity] ?? []
    }

    /// ``removeFiles(ownedBy:)`` for several accounts at once (one walk of the roots): a tenant's wipe.
    /// `Identity.unmanaged` is ignored.
    ///
    /// Access: as ``removeFiles(ownedBy:)``, for every account, before anything is deleted.
    /// - Returns: the absolute paths deleted, sorted, by owner (owners with none are absent).
    @discardableResult
    public func removeFiles(ownedByAnyOf accounts: Set<Identity>) throws(ProtectionError) -> [Identity: [String]] {
        try authorizeRemoval(of: accounts)
        return try removeFilesAsPolicy(ownedByAnyOf: accounts)
    }

    /// The access check of ``removeFiles(ownedByAnyOf:)``: a modification of every account's data by the caller.
    func authorizeRemoval(of accounts: Set<Identity>) throws(ProtectionError) {
        let caller = IdentityContext.effectiveFileIdentity
        for account in accounts.sorted(by: { $0.foldedName < $1.foldedName }) {
            try policy.authorize(.modify(writer: caller), to: account)
        }
    }

    /// The removal of ``removeFiles(ownedByAnyOf:)`` without asking the policy: for the policy's own wipe
    /// (`PolicyManager`, which decided it and has blocked the accounts) and for finishing a wipe that a crash
    /// interrupted (it was allowed when it started).
    package func removeFilesAsPolicy(ownedByAnyOf accounts: Set<Identity>) throws(ProtectionError) -> [Identity: [String]] {
        guard var wipe = try startWipe(of: accounts) else { return [:] }
        for account in wipe.accounts {
            do throws(ProtectionError) { try keyStore.destroyKeys(for: account) } catch { wipe.note(error) }
        }
        return try finishWipe(wipe)
    }

    /// ``removeFilesAsPolicy(ownedByAnyOf:)`` with the keys destroyed through the key store's asynchronous
    /// requirement, answered by `deadline`.
    package func removeFilesAsPolicy(
        ownedByAnyOf accounts: Set<Identity>, keysBy deadline: ContinuousClock.Instant
    ) async throws(ProtectionError) -> [Identity: [String]] {
        // The file part waits for creations in flight, some of which may be asynchronous operations awaiting a
        // key on the cooperative pool, and walks the roots: on a GCD thread, never holding a cooperative one.
        let started = await withCheckedContinuation { (continuation: CheckedContinuation<Result<WipeRun?, ProtectionError>, Never>) in
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(returning: Result { () throws(ProtectionError) in try self.startWipe(of: accounts) })
            }
        }
        guard var wipe = try started.get() else { return [:] }
        for account in wipe.accounts {
            do throws(ProtectionError) { try await keyStore.destroyKeys(for: account, deadline: deadline) } catch { wipe.note(error) }
        }
        return try finishWipe(wipe)
    }

    /// A wipe between its file part and its end: the accounts (sorted), what was removed, the first failure.
    struct WipeRun: Sendable {
        var accounts: [Identity]
        var removed: [Identity: [String]] = [:]
        var firstError: ProtectionError?

        mutating func note(_ error: ProtectionError) {
            if firstError == nil { firstError = error }
        }
    }

    /// The file part of a wipe: journals the accounts, waits for their creations in flight, deletes their
    /// files and forgets their directories' ownership. `nil` when there is no account to wipe.
    private func startWipe(of accounts: Set<Identity>) throws(ProtectionError) -> WipeRun? {
        let accounts = accounts.filter { !$0.isUnmanaged }
        guard !accounts.isEmpty else { return nil }
        try journal.add(accounts)
        creations.waitUntilIdle(accounts)
        var wipe = WipeRun(accounts: accounts.sorted { $0.foldedName < $1.foldedName })
        var forgotten: [stat] = []
        walkRoots(directory: { path, info in
            do throws(ProtectionError) {
                guard let owner = try owners.owner(path: path, info: info), accounts.contains(owner) else { return }
                try owners.setOwner(nil, path: path)
            } catch {
                if case .invalidIdentity = error { return }
                wipe.note(error)
            }
        }) { path, info in
            do throws(ProtectionError) {
                guard let owner = try owner(forWipeOf: path, info: info), accounts.contains(owner) else { return }
                try POSIX.unlinkPath(path)
                wipe.removed[owner, default: []].append(path)
                forgotten.append(info)
            } catch {
                if case .fileNotFound = error { return }
                wipe.note(error)
            }
        } onError: { error in
            wipe.note(error)
        }
        for directory in Set(wipe.removed.values.joined().map(Paths.parent)) {
            do throws(ProtectionError) { try POSIX.fsyncDirectory(directory) } catch {
                wipe.note(error)
            }
        }
        do throws(ProtectionError) { try owners.forget(forgotten) } catch {
            wipe.note(error)
        }
        return wipe
    }

    /// The end of a wipe, once the keys are destroyed: the journal entry goes, the first failure is thrown.
    private func finishWipe(_ wipe: WipeRun) throws(ProtectionError) -> [Identity: [String]] {
        var wipe = wipe
        // The attempt is over; a failure is the caller's to report, not the next start's to repeat.
        do throws(ProtectionError) { try journal.remove(Set(wipe.accounts)) } catch { wipe.note(error) }
        if let firstError = wipe.firstError { throw firstError }
        return wipe.removed.mapValues { $0.sorted() }
    }

    /// Every owner of a regular file under the protected roots (symbolic links are not followed).
    /// - Throws: the first failure to read a directory or an owner.
    public func ownersUnderRoots() throws(ProtectionError) -> Set<Identity> {
        var found = Set<Identity>()
        var firstError: ProtectionError?
        walkRoots { path, info in
            do throws(ProtectionError) {
                if let owner = try owner(forWipeOf: path, info: info) { found.insert(owner) }
            } catch {
                if case .fileNotFound = error { return }
                if firstError == nil { firstError = error }
            }
        } onError: { error in
            if firstError == nil { firstError = error }
        }
        if let firstError { throw firstError }
        return found
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
    public func removeInterruptedWrites(olderThan minimumAge: Double = 60) throws(ProtectionError) -> [String] {
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
                forgotten.append(info)
            } catch {
                if case .fileNotFound = error { return }
                if firstError == nil { firstError = error }
            }
        }
        walkRoots(sweep) { error in
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

    /// Finishes the removals a crash cut short (see ``removeFiles(ownedBy:)``).
    func finishInterruptedRemovals() throws(ProtectionError) {
        let pending = try journal.pending()
        if !pending.isEmpty { _ = try removeFilesAsPolicy(ownedByAnyOf: pending) }
    }

    private func walkRoots(
        directory visitDirectory: (String, stat) -> Void = { _, _ in },
        _ visit: (String, stat) -> Void, onError: (ProtectionError) -> Void
    ) {
        var visited = Set<String>()
        for root in roots {
            walk(root, visited: &visited, directory: visitDirectory, visit, onError: onError)
        }
    }

    private func owner(forWipeOf path: String, info: stat) throws(ProtectionError) -> Identity? {
        do throws(ProtectionError) {
            if let owner = try owners.owner(path: path, info: info) { return owner }
        } catch .invalidIdentity {
            // An unreadable recorded owner is no owner; fall through to the header.
        }
        do throws(ProtectionError) {
            return try encryptedHeader(path)?.owner
        } catch {
            if case .ioFailure = error { throw error }
            return nil
        }
    }

    /// Visits every directory (with `visitDirectory`) and every regular file (with `visit`) under `directory`,
    /// not following symbolic links, not entering the state directory.
    private func walk(
        _ directory: String, visited: inout Set<String>, directory visitDirectory: (String, stat) -> Void,
        _ visit: (String, stat) -> Void, onError: (ProtectionError) -> Void
    ) {
        guard !visited.contains(directory), directory != stateDirectory else { return }
        visited.insert(directory)
        let names: [String]
        do throws(ProtectionError) {
            guard let info = try POSIX.lstatPath(directory), POSIX.isDirectory(info) else { return }
            visitDirectory(directory, info)
            names = try POSIX.directoryEntries(directory)
        } catch {
            return onError(error)
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
                onError(error)
            }
        }
    }
}
