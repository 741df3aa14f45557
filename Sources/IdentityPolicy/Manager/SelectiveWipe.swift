import Dispatch
import IdentityProtection
import IdentityRuntime

/// How a ``PolicyManager`` holds the `FileProtectionManager` its wipes delete files with: the file manager's
/// storage (roots, key store, owners, wipe journal) strongly, and the file manager itself weakly. A file
/// manager holds its policy, which is often this manager (or a wrapper of it): holding only the part without
/// the policy makes no reference cycle, and a wipe still reaches every file and key after the app released
/// the file manager.
struct FileProtectionLink {
    /// What the wipe works on.
    let storage: ProtectedRoots
    /// The file manager, for ``PolicyManager/fileProtection``, while someone else holds it.
    weak var manager: FileProtectionManager?

    init(_ files: FileProtectionManager) {
        storage = files.storage
        manager = files
    }
}

/// One selective wipe (``PolicyManager/wipeData(forAccount:)``, ``PolicyManager/wipeData(forTenant:)``): the
/// policy manager, the file manager's storage and the key store it works over, read once when it starts.
///
/// Neither manager holds a wipe; a wipe holds them only while it runs.
struct SelectiveWipe: Sendable {
    let manager: PolicyManager

    /// Runs the wipe on a GCD thread (never the main queue, never a thread of the cooperative pool: it walks
    /// the roots and waits for writes in flight) for the accounts `accounts` names, given the file storage,
    /// with what finding them could not look into (reported, and the wipe goes on with what it found).
    func run(
        _ accounts: @escaping @Sendable (ProtectedRoots?) -> (accounts: [Identity], unreadable: [WipeLeftover])
    ) async -> (reports: [WipeReport], unreadable: [WipeLeftover]) {
        await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                let files = manager.state.withLock { $0.fileProtection?.storage }
                let found = accounts(files)
                continuation.resume(returning: (wipe(found.accounts, files: files), found.unreadable))
            }
        }
    }

    /// The steps of ``PolicyManager/wipeData(forAccount:)`` for `accounts`, the files of all of them in one
    /// walk.
    private func wipe(_ accounts: [Identity], files: ProtectedRoots?) -> [WipeReport] {
        let accounts = accounts.filter { !$0.isUnmanaged }
        // From the start nothing new is created for the accounts, by any thread, and no handle open on their
        // data reads or writes again (whoever deletes the data: the runtime or the delegate).
        for account in accounts { manager.block(account, reason: .wiped, window: nil) }
        let (delegate, keys) = manager.state.withLock { ($0.delegate, $0.keyStore) }
        for account in accounts {
            if let files { KeyRevocations.shared.revoke(account, in: files.keyStore) }
            if let keys { KeyRevocations.shared.revoke(account, in: keys) }
        }
        var reports = accounts.map { account in
            WipeReport(account: account, handledByDelegate: delegate?.wipeData(forAccount: account) ?? false, removedFiles: [], error: nil)
        }
        let runtimeWiped = Set(reports.filter { !$0.handledByDelegate }.map(\.account))
        var outcome = FileWipeOutcome()
        if let files, !runtimeWiped.isEmpty {
            do throws(ProtectionError) {
                // The policy's own wipe: the accounts are blocked, so the caller's access is not the question.
                outcome = try files.wipeAsPolicy(ownedByAnyOf: runtimeWiped)
            } catch {
                // The wipe could not start (its journal): nothing was removed.
                outcome.error = error
            }
        }
        var keyFailures: [Identity: ProtectionError] = [:]
        if let keys {
            for account in runtimeWiped.sorted(by: { $0.foldedName < $1.foldedName }) {
                do throws(ProtectionError) {
                    try keys.destroyKeys(for: account)
                } catch {
                    keyFailures[account] = error
                }
                // Handles opened while the wipe ran stop too.
                KeyRevocations.shared.revoke(account, in: keys)
            }
        }
        // A failure of no path and no account (the wipe could not start, its journal could not be updated)
        // concerns every account of the wipe, also when other failures left files behind.
        let general = outcome.error.flatMap { error in
            outcome.leftovers.contains { $0.error == error } || outcome.keyFailures.values.contains(error) ? nil : error
        }
        for index in reports.indices where runtimeWiped.contains(reports[index].account) {
            let account = reports[index].account
            // A directory the walk could not read may hold any account's files: it is every account's leftover.
            let mine = outcome.leftovers.filter { $0.owner == nil || $0.owner == account }
            reports[index].leftovers = mine
            reports[index].error = mine.first?.error ?? outcome.keyFailures[account] ?? keyFailures[account] ?? general
            reports[index].removedFiles = outcome.removed[account] ?? []
        }
        for account in accounts { manager.finishWipe(of: account) }
        return reports
    }
}
