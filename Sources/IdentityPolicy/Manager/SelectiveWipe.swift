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
    /// the roots and waits for writes in flight) for the accounts `accounts` names, given the file storage.
    func run(
        _ accounts: @escaping @Sendable (ProtectedRoots?) -> [Identity]
    ) async -> [WipeReport] {
        await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                let files = manager.state.withLock { $0.fileProtection?.storage }
                continuation.resume(returning: wipe(accounts(files), files: files))
            }
        }
    }

    /// The steps of ``PolicyManager/wipeData(forAccount:)`` for `accounts`, the files of all of them in one
    /// walk.
    private func wipe(_ accounts: [Identity], files: ProtectedRoots?) -> [WipeReport] {
        let accounts = accounts.filter { !$0.isUnmanaged }
        // From the start nothing new is created for the accounts, by any thread.
        for account in accounts { manager.block(account, reason: .wiped, window: nil) }
        let (delegate, keys) = manager.state.withLock { ($0.delegate, $0.keyStore) }
        var reports = accounts.map { account in
            WipeReport(account: account, handledByDelegate: delegate?.wipeData(forAccount: account) ?? false, removedFiles: [], error: nil)
        }
        let runtimeWiped = Set(reports.filter { !$0.handledByDelegate }.map(\.account))
        var failure: ProtectionError?
        var removed: [Identity: [String]] = [:]
        if let files, !runtimeWiped.isEmpty {
            do throws(ProtectionError) {
                // The policy's own wipe: the accounts are blocked, so the caller's access is not the question.
                removed = try files.removeFilesAsPolicy(ownedByAnyOf: runtimeWiped)
            } catch {
                failure = error
            }
        }
        if let keys {
            for account in runtimeWiped.sorted(by: { $0.foldedName < $1.foldedName }) {
                do throws(ProtectionError) {
                    try keys.destroyKeys(for: account)
                } catch {
                    if failure == nil { failure = error }
                }
            }
        }
        for index in reports.indices where runtimeWiped.contains(reports[index].account) {
            reports[index].error = failure
            reports[index].removedFiles = removed[reports[index].account] ?? []
        }
        for account in accounts { manager.finishWipe(of: account) }
        return reports
    }
}
