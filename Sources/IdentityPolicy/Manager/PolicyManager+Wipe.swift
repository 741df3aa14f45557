import Dispatch
import IdentityProtection
import IdentityRuntime

/// What a selective wipe did.
public struct WipeReport: Sendable {
    /// The account wiped.
    public var account: Identity
    /// `true`: the delegate's `wipeData(forAccount:)` returned `true` and deleted the data itself.
    public var handledByDelegate: Bool
    /// The files the runtime deleted (absolute paths, sorted).
    public var removedFiles: [String]
    /// The first failure of the runtime's deletion, after everything else was done.
    public var error: ProtectionError?
}

extension PolicyManager {
    /// The selective wipe of `account` (DESIGN §4).
    ///
    /// On a background thread (never the main queue): the ``delegate``'s `wipeData(forAccount:)` runs.
    /// When it returns `false`, or there is no delegate, the runtime deletes every file `account` owns under
    /// ``fileProtection``'s roots and destroys its keys (also in ``keyStore``), so that copies elsewhere no
    /// longer decrypt. Then `account` is removed from the windows showing it, its conditional-launch blocks
    /// clear (its data is gone; the next switch runs the checks again), and `.wipeDidComplete` is posted (with
    /// the ``PolicyEvent/wipeDidComplete(account:)`` event), whatever the outcome.
    @discardableResult
    public func wipeData(forAccount account: Identity) async -> WipeReport {
        await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async { [self] in
                continuation.resume(returning: wipeNow(account))
            }
        }
    }

    private func wipeNow(_ account: Identity) -> WipeReport {
        let (delegate, files, keys) = state.withLock { ($0.delegate, $0.fileProtection, $0.keyStore) }
        var report = WipeReport(account: account, handledByDelegate: delegate?.wipeData(forAccount: account) ?? false, removedFiles: [], error: nil)
        if !report.handledByDelegate, !account.isUnmanaged {
            if let files {
                do throws(ProtectionError) {
                    report.removedFiles = try files.removeFiles(ownedBy: account)
                } catch {
                    report.error = error
                }
            }
            if let keys {
                do throws(ProtectionError) {
                    try keys.destroyKeys(for: account)
                } catch {
                    if report.error == nil { report.error = error }
                }
            }
        }
        let (windows, superseded) = state.withLock { state in
            let cleared = state.switches.clear(identity: account)
            let windows = cleared.windows.map { ($0, state.switches.identity(for: $0)) }
            if scope == .processWide {
                for (window, identity) in windows { IdentityContext.setUIPolicyIdentity(identity, for: window) }
            }
            return (windows, cleared.superseded)
        }
        superseded.forEach(cancel)
        unblockAccount(account, reason: .conditionalLaunchBlocked)
        unblockAccount(account, reason: .conditionalLaunchCanceled)
        for (window, identity) in windows { send(.uiIdentityDidChange(window: window, identity: identity)) }
        send(.wipeDidComplete(account: account))
        return report
    }
}
