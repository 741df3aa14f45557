import Dispatch
import Foundation
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
    /// The first failure of the runtime's deletion, after everything else was done; never `nil` while
    /// ``leftovers`` is not empty or the account's keys could not be destroyed.
    public var error: ProtectionError?
    /// What the runtime could not remove, or could not look into (a directory it could not read may hold the
    /// account's files), with the reason for each, sorted by path. The account stays in the wipe journal:
    /// the next wipe of it, or the next start, tries again.
    public var leftovers: [WipeLeftover] = []

    /// Whether the wipe removed everything it was asked to: no failure and nothing left.
    public var isComplete: Bool { error == nil && leftovers.isEmpty }
}

/// What a wipe of a tenant did (``PolicyManager/wipeData(forTenant:)``).
public struct TenantWipeReport: Sendable {
    /// The tenant wiped.
    public var tenant: TenantID
    /// One report per account of the tenant, sorted by account.
    public var accounts: [WipeReport]
    /// What the search for the tenant's accounts could not look into (a directory under the roots it could not
    /// read, a file whose owner it could not read, a key file it could not read, or a key store that could not
    /// list at all: its first key directory, or `<key store>`): owners there may be accounts of the tenant that
    /// the wipe did not reach. The search goes on past each. An entry with an empty path: the search did not settle
    /// (accounts kept joining the tenant during the wipe, see ``PolicyManager/wipeData(forTenant:)``).
    public var leftovers: [WipeLeftover] = []
    /// The first of ``leftovers``' errors (`nil` when the search read everything).
    public var error: ProtectionError? { leftovers.first?.error }

    /// Whether the tenant's data is gone: every account's wipe is complete and the search read everything.
    public var isComplete: Bool { leftovers.isEmpty && accounts.allSatisfy(\.isComplete) }
}

extension PolicyManager {
    /// The selective wipe of `account` (<doc:AccountsAndPolicies>, <doc:ServiceBoundary>).
    ///
    /// On a background thread (never the main queue):
    /// 1. From the start, the account is blocked (``BlockAccountReason/wiped``): no file, envelope or
    ///    admission is created for it any more, by any thread, and it stays so after the wipe until it is
    ///    enrolled again or ``unblockAccount(_:reason:)`` lifts it.
    /// 2. The ``delegate``'s `wipeData(forAccount:)` runs. When it returns `false`, or there is no delegate,
    ///    the runtime deletes every file `account` owns under ``fileProtection``'s roots (waiting for writes
    ///    that were already under way; symbolic links are never followed out of the roots) and destroys its
    ///    keys (also in ``keyStore``), so that copies elsewhere no longer decrypt. A wipe cut short by a crash
    ///    is finished when the next `FileProtectionManager` starts on the same state directory.
    /// 3. `account` is removed from the windows showing it, its conditional-launch blocks clear, and
    ///    `.wipeDidComplete` is posted (with the ``PolicyEvent/wipeDidComplete(account:)`` event), whatever
    ///    the outcome.
    /// 4. The ``observer``, if any, gets the report and the wipe's duration
    ///    (``PolicyManagerObserver/didWipe(_:tenant:unreadable:duration:)``).
    ///
    /// When it returns, no file owned by `account` remains under the roots (unless the delegate handled the
    /// wipe itself).
    @discardableResult
    public func wipeData(forAccount account: Identity) async -> WipeReport {
        let observed = startObservingWipe()
        let report = await SelectiveWipe(manager: self).run { [account] _ in ([account], []) }.reports[0]
        if case let (observer, start)? = observed { observer.didWipe([report], tenant: nil, unreadable: [], duration: .now - start) }
        return report
    }

    /// Wipes every account of `tenant` as ``wipeData(forAccount:)`` does: the accounts the manager knows in that
    /// tenant (``tenant(for:)``), every other owner of files or directories under the roots whose tenant it is,
    /// every account of the tenant with a file being written when the wipe starts (the wipe waits for it), and
    /// every account of the tenant the file manager's key store, or ``keyStore``, holds keys of
    /// (`KeyStore.identitiesWithKeys()`).
    /// The search runs again once those are wiped, until it finds no account of the tenant it has not wiped (an
    /// account registered into the tenant meanwhile, with files from before): the last search found nothing.
    ///
    /// From the start until the wipe returns, every account of `tenant` is blocked (``BlockAccountReason/wiped``, or
    /// a cause of its own that comes first), also one the wipe has not found (first seen meanwhile, or registered
    /// into the tenant meanwhile): nothing is created or admitted for the tenant while its files are searched and
    /// removed, so nothing of it survives the wipe. That block is the tenant's: it is not announced per account (an
    /// account's own cause that ends meanwhile is announced as unblocked, although the tenant's block still refuses
    /// it until the wipe returns), ``blockedAccounts`` lists the known accounts of the tenant while it lasts, and it
    /// ends when the wipe returns. The accounts the wipe found stay blocked as ``wipeData(forAccount:)`` leaves them.
    ///
    /// An account of the tenant that the manager does not know, that owns nothing under the roots and whose keys
    /// are in a store that cannot list them (`KeyStore.identitiesWithKeys()` is `nil`) is not found: its keys
    /// stay; wipe it by name with ``wipeData(forAccount:)``. A store that fails to list them makes the report
    /// incomplete (``TenantWipeReport/leftovers``).
    @discardableResult
    public func wipeData(forTenant tenant: TenantID) async -> TenantWipeReport {
        let observed = startObservingWipe()
        // Before the search: an account it cannot find yet is refused from now on.
        let started = state.withLock { state in
            state.blocks.beginWipe(of: tenant)
            return state.fileProtection?.storage
        }
        // Creations that begin from here on ask their check after the block: they are refused, and not waited for.
        let horizon = started?.creationHorizon()
        var reports: [WipeReport] = []
        var unreadable: [WipeLeftover] = []
        var wiped = Set<Identity>()
        var settled = false
        // Each round finds fewer accounts: nothing new is created for the tenant, and every account found is
        // wiped; the bound only stops a tenant whose accounts keep being registered into it from holding the wipe.
        for _ in 0..<Self.tenantWipeRounds {
            let done = wiped
            let round = await SelectiveWipe(manager: self).run { files in
                var accounts = Set(self.state.withLock { $0.accounts.known(inTenant: tenant) })
                // A write that passed its check before the block has no file to find yet: its owner is wiped
                // too (the wipe waits for the write). One that asks later is refused. Read before the walk, so
                // that a write ending in between leaves its file for the walk to find.
                let writing = files?.ownersOfCreationsInFlight(upTo: files === started ? horizon : nil) ?? []
                // The search goes on past what it cannot read, and reports it: the owners it did find are wiped,
                // and the report says the tenant's data may not all be gone.
                let found = files?.ownersUnderRootsReporting(includingDirectories: true) ?? (owners: [], unreadable: [])
                let keyed = self.identitiesWithKeys(files: files)
                accounts.formUnion(writing.union(found.owners).union(keyed.identities).filter {
                    !$0.isUnmanaged && self.tenant(for: $0) == tenant
                })
                return (accounts.subtracting(done).sorted { $0.foldedName < $1.foldedName }, found.unreadable + keyed.unreadable)
            }
            // What the last search could not read is what may still hold the tenant's data.
            unreadable = round.unreadable
            if round.reports.isEmpty {
                settled = true
                break
            }
            reports += round.reports
            wiped.formUnion(round.reports.map(\.account))
        }
        if !settled {
            // Nobody can say the tenant's data is gone: the report is not complete.
            unreadable.append(WipeLeftover(
                path: "", owner: nil,
                error: .ioFailure(
                    path: "", operation: "search for the accounts of \(tenant) (accounts kept joining it during its wipe)",
                    errno: EAGAIN)))
        }
        state.withLock { $0.blocks.endWipe(of: tenant) }
        reports.sort { $0.account.foldedName < $1.account.foldedName }
        if case let (observer, start)? = observed {
            observer.didWipe(reports, tenant: tenant, unreadable: unreadable, duration: .now - start)
        }
        return TenantWipeReport(tenant: tenant, accounts: reports, leftovers: unreadable)
    }

    /// The identities the wipe's key stores hold keys of: the file manager's and ``keyStore``, whose keys a
    /// wipe destroys too; what they could not read, once per path.
    private func identitiesWithKeys(files: ProtectedRoots?) -> KeyListing {
        var listing = files?.identitiesWithKeysReporting() ?? KeyListing(identities: [])
        if let store = state.withLock({ $0.keyStore }) {
            let more = store.listingReportingFailure()
            listing.identities.formUnion(more.identities)
            for leftover in more.unreadable where !listing.unreadable.contains(where: { $0.path == leftover.path }) {
                listing.unreadable.append(leftover)
            }
        }
        return listing
    }

    /// How many searches a wipe of a tenant makes at most (see ``wipeData(forTenant:)``).
    static let tenantWipeRounds = 8

    /// The ``observer`` and the time a wipe starts, when there is an observer (no clock is read otherwise).
    private func startObservingWipe() -> (observer: any PolicyManagerObserver, start: ContinuousClock.Instant)? {
        state.withLock { $0.observer }.map { ($0, .now) }
    }

    /// The last step of a wipe of `account`: it leaves the windows showing it (superseding switches to it),
    /// its conditional-launch blocks clear, and `.wipeDidComplete` is posted.
    func finishWipe(of account: Identity) {
        let (windows, superseded) = state.withLock { state in
            let cleared = state.switches.clear(identity: account)
            for window in cleared.windows { state.publishUIIdentity(for: window) }
            return (cleared.windows.map { ($0, state.switches.identity(for: $0)) }, cleared.superseded)
        }
        superseded.forEach(cancel)
        unblockAccount(account, reason: .conditionalLaunchBlocked)
        unblockAccount(account, reason: .conditionalLaunchCanceled)
        for (window, identity) in windows { send(.uiIdentityDidChange(window: window, identity: identity)) }
        send(.wipeDidComplete(account: account))
    }
}
