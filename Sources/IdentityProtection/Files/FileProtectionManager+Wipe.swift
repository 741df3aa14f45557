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
    /// without one, the owner in its header. Deletion goes on past a failure (a file it cannot remove, a
    /// directory it cannot read); the keys are destroyed in any case, and the first failure is thrown at the
    /// end: the call never returns while something it was asked to remove remains. The account then stays
    /// in the wipe journal, so the next removal of it, or the next start, tries again.
    ///
    /// Open handles: every ``ProtectedFile`` of the account stops at the start of the removal (and any opened
    /// while it runs, at its end): each later operation on it is refused with
    /// ``ProtectionError/keyNotFound(identity:keyID:)`` (103), for good.
    ///
    /// Writers racing the wipe: the removal first waits for every creation for `identity` that had passed
    /// the access check (``ManagedIdentityPolicy/refusal(of:to:)``), then deletes. A policy that refuses
    /// ``ProtectedDataAccess/create`` for the account from the start of the wipe (as `PolicyManager` does)
    /// makes sure that no file of it remains afterwards, whatever other threads kept doing.
    ///
    /// Crashes: the wipe, with its accounts and the roots it walks, is written to `wipes.journal` in the state
    /// directory before anything is deleted, and taken out at the end (only when nothing remains), so a wipe cut
    /// short by a crash is finished by the next ``FileProtectionManager`` made on the same state directory,
    /// over its own roots and the ones that wipe had, before its initializer returns (wipes still running, in
    /// another manager on that state directory, are left to it). A wipe that completes also takes out the older
    /// wipes of the account over roots it walked that are no longer running, never a running one, one that
    /// began after it, or one over other roots.
    ///
    /// Access: deleting an account's files and keys is a modification of its data, asked of the policy
    /// (``ProtectedDataAccess/modify(writer:)``) for the caller's `IdentityContext.effectiveFileIdentity`
    /// before anything is deleted: under isolation an account removes its own files, and code with no identity,
    /// `""` or another tenant's account gets the policy's refusal. An account that is no longer managed is
    /// refused to everyone but itself, too: its data may be recorded isolated (see
    /// ``releaseIsolation(atPath:)``). The administrative wipe of an account, managed or not, is
    /// `PolicyManager.wipeData(forAccount:)`, which blocks the account first and then removes its files as
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
    /// Each account's data is taken as isolated: what the roots hold of it may have been created while it was
    /// managed (that is known only file by file), and destroying its keys reaches every envelope it ever had.
    func authorizeRemoval(of accounts: Set<Identity>) throws(ProtectionError) {
        let caller = IdentityContext.effectiveFileIdentity
        for account in accounts.sorted(by: { $0.foldedName < $1.foldedName }) {
            try policy.authorize(.modify(writer: caller), to: RecordedOwner(account, isolated: true))
        }
    }

    /// The removal of ``removeFiles(ownedByAnyOf:)`` without asking the policy: for the policy's own wipe
    /// (`PolicyManager`, which decided it and has blocked the accounts).
    package func removeFilesAsPolicy(ownedByAnyOf accounts: Set<Identity>) throws(ProtectionError) -> [Identity: [String]] {
        try storage.removeFilesAsPolicy(ownedByAnyOf: accounts)
    }

    /// ``removeFilesAsPolicy(ownedByAnyOf:)`` with the keys destroyed through the key store's asynchronous
    /// requirement, answered by `deadline`.
    package func removeFilesAsPolicy(
        ownedByAnyOf accounts: Set<Identity>, keysBy deadline: ContinuousClock.Instant
    ) async throws(ProtectionError) -> [Identity: [String]] {
        try await storage.removeFilesAsPolicy(ownedByAnyOf: accounts, keysBy: deadline)
    }

    /// Every owner of a regular file under the protected roots (symbolic links are not followed).
    /// - Throws: the first failure to read a directory or an owner.
    public func ownersUnderRoots() throws(ProtectionError) -> Set<Identity> {
        try storage.ownersUnderRoots()
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
        try storage.removeInterruptedWrites(olderThan: minimumAge)
    }
}
