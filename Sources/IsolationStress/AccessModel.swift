import IdentityPolicy
import IdentityRuntime

/// Which accounts the program has blocked, with a version per account: odd while a change is under way, so an
/// outcome is judged only when no block of an account it involves changed between its start and its end.
final class BlockBoard: Sendable {
    /// The blocks of the accounts of one call, as they were when it started.
    struct Snapshot {
        let blocked: Set<Identity>
        let versions: [Identity: Int]
    }

    private struct State {
        var blocked: Set<Identity> = []
        var versions: [Identity: Int] = [:]
        var changes = 0
    }

    private let state = LockedValue(State())
    /// One change at a time, so a version is odd exactly while its change runs.
    private let changing = LockedValue(())

    /// The blocks of `identities` now.
    func snapshot(_ identities: [Identity?]) -> Snapshot {
        state.withLock { state in
            var versions: [Identity: Int] = [:]
            for case let identity? in identities { versions[identity] = state.versions[identity] ?? 0 }
            return Snapshot(blocked: state.blocked.filter { versions[$0] != nil }, versions: versions)
        }
    }

    /// Whether no block of the snapshot's accounts changed since it was taken (nor was changing then).
    func isUnchanged(since snapshot: Snapshot) -> Bool {
        state.withLock { state in
            snapshot.versions.allSatisfy { identity, version in version.isMultiple(of: 2) && state.versions[identity] ?? 0 == version }
        }
    }

    /// Blocks `identity` in `manager` when it is not blocked, and unblocks it otherwise.
    func toggle(_ identity: Identity, in manager: PolicyManager) {
        changing.withLock { _ in
            let block = state.withLock { state -> Bool in
                state.versions[identity, default: 0] += 1
                return !state.blocked.contains(identity)
            }
            if block { manager.blockAccount(identity, reason: .clockedOut) } else { manager.unblockAccount(identity) }
            state.withLock { state in
                if block { state.blocked.insert(identity) } else { state.blocked.remove(identity) }
                state.versions[identity, default: 0] += 1
                state.changes += 1
            }
        }
    }

    /// Blocks and unblocks so far.
    var changes: Int { state.withLock { $0.changes } }
}

/// The access matrix of Sources/IdentityPolicy/IdentityPolicy.docc/ServiceBoundary.md as a model: the refusal codes it gives for an operation, from
/// the configuration and the blocks alone (an empty set: allowed).
struct AccessModel: Sendable {
    /// The tenant of each managed account (accounts outside it are unmanaged).
    let tenants: [Identity: Int]
    /// The data-transfer level of each tenant's policy.
    let levels: [Int: DataTransferLevel]
    /// The tenants whose policy requires file encryption.
    let encryptingTenants: Set<Int>

    /// Whether the level of `owner`'s tenant lets its data reach `reader` (or be given to it). Data that no
    /// tenant manages goes anywhere.
    func levelAllows(owner: Identity?, reader: Identity?) -> Bool {
        guard let owner, let ownerTenant = tenants[owner] else { return true }
        if reader == owner { return true }
        let readerTenant = reader.flatMap { tenants[$0] }
        switch levels[ownerTenant] ?? .sameTenant {
        case .none: return false
        case .sameTenant: return readerTenant == ownerTenant
        case .managedAccounts: return readerTenant != nil
        case .any: return true
        }
    }

    /// Whether `identity` is an account that can be blocked and is (`nil` and `""` never are).
    private func isBlocked(_ identity: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool {
        guard let identity, !identity.isUnmanaged else { return false }
        return blocks.blocked.contains(identity)
    }

    /// A read of `owner`'s data by `caller`, or a modification that keeps its owner: data with no owner or
    /// owned by `""` is everyone's; a blocked owner refuses all (`ProtectionError.accountBlocked(identity:reason:)` (109)); a blocked caller reads nothing owned
    /// (`ProtectionError.accessDenied(identity:reader:)` (108)); otherwise the owner's level decides (108).
    func read(owner: Identity?, by caller: Identity?, _ blocks: BlockBoard.Snapshot) -> Set<Int> {
        guard let owner, !owner.isUnmanaged else { return [] }
        if isBlocked(owner, blocks) { return [109] }
        if isBlocked(caller, blocks) { return [108] }
        return levelAllows(owner: owner, reader: caller) ? [] : [108]
    }

    /// `owner`'s data given to `recipient`: refused when either is blocked (`ProtectionError.accountBlocked(identity:reason:)` (109)),
    /// else by the owner's level (`ProtectionError.accessDenied(identity:reader:)` (108)).
    func transfer(owner: Identity?, to recipient: Identity?, _ blocks: BlockBoard.Snapshot) -> Set<Int> {
        guard let owner, !owner.isUnmanaged else { return [] }
        if isBlocked(owner, blocks) || isBlocked(recipient, blocks) { return [109] }
        return levelAllows(owner: owner, reader: recipient) ? [] : [108]
    }

    /// New data for `owner`: refused only for a blocked owner (`ProtectionError.accountBlocked(identity:reason:)` (109)).
    func create(for owner: Identity?, _ blocks: BlockBoard.Snapshot) -> Set<Int> {
        isBlocked(owner, blocks) ? [109] : []
    }

    /// `caller` changes `owner`'s data into data of `newOwner`: a modification, and a transfer when the owner
    /// changes.
    func modify(owner: Identity?, by caller: Identity?, newOwner: Identity?, _ blocks: BlockBoard.Snapshot) -> Set<Int> {
        read(owner: owner, by: caller, blocks).union(newOwner == owner ? [] : transfer(owner: owner, to: newOwner, blocks))
    }

    /// `isDataTransferAllowed(from:to:)`: never with a blocked side, else by the source's level.
    func isTransferAllowed(from source: Identity?, to target: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool {
        !isBlocked(source, blocks) && !isBlocked(target, blocks) && levelAllows(owner: source, reader: target)
    }

    /// Any operation on `owner`'s data through a manager whose policy source has never loaded: `ProtectionError.policyUnavailable(reason:)` (115) unless the
    /// data has no owner or is `""`'s.
    func unloaded(owner: Identity?) -> Set<Int> {
        guard let owner, !owner.isUnmanaged else { return [] }
        return [115]
    }

    /// Whether files of `owner` must be encrypted at rest.
    func mustEncrypt(_ owner: Identity?) -> Bool {
        guard let owner, let tenant = tenants[owner] else { return false }
        return encryptingTenants.contains(tenant)
    }
}
