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
    /// The runtime's own directories (real paths), never read or written through the file APIs.
    let reservedDirectories: [String]
    let owners: FileOwnerStore
    let journal: WipeJournal
    let creations = CreationTracker()
    private let registeredRoots: LockedValue<[String]>

    /// Roots over `stateDirectory` (a real path, made private by the caller), finishing a wipe a crash cut
    /// short there before it returns.
    init(roots: [String], keyStore: any KeyStore, stateDirectory: String, ownerStorage: OwnerStorage) throws(ProtectionError) {
        self.keyStore = keyStore
        self.stateDirectory = stateDirectory
        self.owners = FileOwnerStore(storage: ownerStorage, index: OwnerIndex(path: Paths.join(stateDirectory, "owners.index")))
        self.journal = WipeJournal(path: Paths.join(stateDirectory, "wipes.journal"))
        self.registeredRoots = LockedValue(roots.map(Paths.absolute))
        self.reservedDirectories = [stateDirectory] + ((keyStore as? FileKeyStore).map { [$0.directory] } ?? [])
        try finishInterruptedRemovals()
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
        guard var wipe = try startWipe(of: accounts) else { return [:] }
        for account in wipe.accounts {
            do throws(ProtectionError) { try keyStore.destroyKeys(for: account) } catch { wipe.note(error) }
        }
        return try finishWipe(wipe)
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
                try owners.setOwner(.unowned, path: path)
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
    package func ownersUnderRoots() throws(ProtectionError) -> Set<Identity> {
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

    /// Finishes the removals a crash cut short (see `FileProtectionManager.removeFiles(ownedBy:)`).
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
            return try EncryptedFileFormat.header(atPath: path)?.owner
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
