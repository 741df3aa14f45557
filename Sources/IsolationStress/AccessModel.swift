import IdentityPolicy
import IdentityRuntime

/// What the program has done to the policy of one tenant (its policy document), as the model sees it.
enum TenantState: Sendable, Equatable {
    /// A good document is in force (also after a broken edit of a good document: the last good one stays).
    case managed
    /// The document was deleted: the tenant's accounts are no longer managed; data recorded as isolated when
    /// it was created stays readable by its owner alone.
    case withdrawn
    /// The document was broken from its first read, and its `tenant` can still be read: the tenant's accounts
    /// refuse (`policyUnavailable`, 115) until it is fixed or removed.
    case broken
    /// The document was broken from its first read and not even its `tenant` can be read (bad JSON): its
    /// accounts refuse (115), and the source may count as not loaded for others too (115 tolerated there).
    case unparseable
}

/// Which accounts the program has blocked, with a version per account (odd while a change is under way, so an
/// outcome is judged only when no block of an account it involves changed between its start and its end),
/// and the state of every tenant's policy document (changed only while no operation runs).
final class BlockBoard: Sendable {
    /// The blocks of the accounts of one call and the tenants' policy states, as they were when it started.
    struct Snapshot {
        let blocked: Set<Identity>
        let versions: [Identity: Int]
        let tenants: [Int: TenantState]
    }

    private struct State {
        var blocked: Set<Identity> = []
        var versions: [Identity: Int] = [:]
        var changes = 0
        var tenants: [Int: TenantState] = [:]
    }

    private let state = LockedValue(State())
    /// One change at a time, so a version is odd exactly while its change runs.
    private let changing = LockedValue(())

    /// The blocks of `identities` now.
    func snapshot(_ identities: [Identity?]) -> Snapshot {
        state.withLock { state in
            var versions: [Identity: Int] = [:]
            for case let identity? in identities { versions[identity] = state.versions[identity] ?? 0 }
            return Snapshot(blocked: state.blocked.filter { versions[$0] != nil }, versions: versions, tenants: state.tenants)
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
            if block { manager.blockAccount(identity, reason: .clockedOut) } else { manager.unblockAccount(identity, reason: .clockedOut) }
            state.withLock { state in
                if block { state.blocked.insert(identity) } else { state.blocked.remove(identity) }
                state.versions[identity, default: 0] += 1
                state.changes += 1
            }
        }
    }

    /// Whether the program has `identity` blocked now.
    func isBlocked(_ identity: Identity) -> Bool {
        state.withLock { $0.blocked.contains(identity) }
    }

    /// Records the state of `tenant`'s document (only while no operation runs).
    func setTenant(_ tenant: Int, _ tenantState: TenantState) {
        state.withLock { $0.tenants[tenant] = tenantState }
    }

    /// The state of `tenant`'s document now.
    func tenant(_ tenant: Int) -> TenantState {
        state.withLock { $0.tenants[tenant] ?? .managed }
    }

    /// Blocks and unblocks so far.
    var changes: Int { state.withLock { $0.changes } }
}

/// What the model accepts as the outcome of one call: refusal codes, and whether it may (or must) be allowed.
/// `[]` is "allowed"; `[109]` is "refused with 109".
struct Expect: Sendable, Equatable, ExpressibleByArrayLiteral {
    var codes: Set<Int>
    var mayAllow: Bool

    init(codes: Set<Int>, mayAllow: Bool) {
        self.codes = codes
        self.mayAllow = mayAllow
    }

    init(arrayLiteral codes: Int...) {
        self.init(codes: Set(codes), mayAllow: codes.isEmpty)
    }

    /// Allowed, and nothing else.
    var isAllowed: Bool { mayAllow && codes.isEmpty }

    /// Both decisions at once (a modification and a transfer): refused when either refuses, with either's codes.
    func union(_ other: Expect) -> Expect {
        Expect(codes: codes.union(other.codes), mayAllow: mayAllow && other.mayAllow)
    }

    /// The same, with `code` accepted too (a decision the runtime may not be able to make).
    func tolerating(_ code: Int) -> Expect {
        Expect(codes: codes.union([code]), mayAllow: mayAllow)
    }

    var description: String {
        let codes = codes.sorted().map(String.init).joined(separator: ", ")
        if isAllowed { return "the matrix allows it" }
        return mayAllow ? "the matrix allows it or gives [\(codes)]" : "the matrix gives [\(codes)]"
    }
}

/// The access matrix of Sources/IdentityPolicy/IdentityPolicy.docc/ServiceBoundary.md as a model: the
/// outcomes it gives for an operation, from the configuration, the blocks and the state of the policy
/// documents alone (never by asking the runtime).
///
/// Beyond the matrix, from the contract of failures (the same article, "Faults"):
/// - an account whose policy document is broken from its first read is neither managed nor unmanaged: every
///   operation on its data, and every creation for it, is refused with `policyUnavailable` (115);
/// - data records its isolation when it is created: data created while its owner was managed stays readable
///   (and changeable, and transferable) by its owner alone after its owner stops being managed.
struct AccessModel: Sendable {
    /// The tenant of each account that a policy document of the program names (by domain).
    let tenants: [Identity: Int]
    /// The data-transfer level of each tenant's policy.
    let levels: [Int: DataTransferLevel]
    /// The tenants whose policy requires file encryption.
    let encryptingTenants: Set<Int>

    enum Standing: Equatable {
        case unmanaged
        case managed(Int)
        /// Its policy document cannot be read: the runtime cannot know.
        case unknown
    }

    func standing(_ identity: Identity?, _ blocks: BlockBoard.Snapshot) -> Standing {
        guard let identity, let tenant = tenants[identity] else { return .unmanaged }
        switch blocks.tenants[tenant] ?? .managed {
        case .managed: return .managed(tenant)
        case .withdrawn: return .unmanaged
        case .broken, .unparseable: return .unknown
        }
    }

    /// Whether some document cannot even be attributed to a tenant: the runtime may then refuse any owned
    /// data (115) as if its source had not loaded.
    private func anyUnparseable(_ blocks: BlockBoard.Snapshot) -> Bool {
        blocks.tenants.values.contains(.unparseable)
    }

    /// Whether the level of `owner`'s tenant (managed) lets its data reach `reader`; `nil`: the runtime cannot
    /// know (the reader's own document is broken).
    func levelAllows(ownerTenant: Int, owner: Identity, reader: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool? {
        if reader == owner { return true }
        let readerStanding = standing(reader, blocks)
        switch levels[ownerTenant] ?? .sameTenant {
        case .none: return false
        case .sameTenant: return readerStanding == .managed(ownerTenant)
        case .managedAccounts:
            switch readerStanding {
            case .managed: return true
            case .unmanaged: return false
            case .unknown: return nil
            }
        case .any: return true
        }
    }

    /// Whether `identity` is an account that can be blocked and is (`nil` and `""` never are).
    private func isBlocked(_ identity: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool {
        guard let identity, !identity.isUnmanaged else { return false }
        return blocks.blocked.contains(identity)
    }

    private static func level(_ answer: Bool?) -> Expect {
        switch answer {
        case true?: return []
        case false?: return [108]
        case nil: return Expect(codes: [108, 115], mayAllow: true)
        }
    }

    /// An account whose document is broken: 115, or the block code a block gives.
    private func unknown(_ owner: Identity?, _ others: [Identity?], _ blocks: BlockBoard.Snapshot) -> Expect {
        var codes: Set<Int> = [115]
        if isBlocked(owner, blocks) { codes.insert(109) }
        if others.contains(where: { isBlocked($0, blocks) }) { codes.formUnion([108, 109]) }
        return Expect(codes: codes, mayAllow: false)
    }

    /// A read of `owner`'s data by `caller`, or a modification that keeps its owner: data with no owner or
    /// owned by `""` is everyone's; a blocked owner refuses all (`ProtectionError.accountBlocked(identity:reason:)` (109)); a blocked caller reads nothing owned
    /// (`ProtectionError.accessDenied(identity:reader:)` (108)); otherwise the owner's level decides (108); data recorded as isolated
    /// whose owner is no longer managed goes to its owner alone (108). `isolated` is what the data recorded
    /// when it was created (`nil`: the model does not know).
    func read(owner: Identity?, by caller: Identity?, isolated: Bool?, _ blocks: BlockBoard.Snapshot) -> Expect {
        guard let owner, !owner.isUnmanaged else { return [] }
        var expect: Expect
        switch standing(owner, blocks) {
        case .unknown:
            return unknown(owner, [caller], blocks)
        case let .managed(tenant):
            if isBlocked(owner, blocks) { return [109] }
            if isBlocked(caller, blocks) { return [108] }
            expect = Self.level(levelAllows(ownerTenant: tenant, owner: owner, reader: caller, blocks))
            // A caller whose own document is broken may be refused for that too (it fails closed either way).
            if standing(caller, blocks) == .unknown { expect = expect.tolerating(115) }
        case .unmanaged:
            if isBlocked(owner, blocks) { return [109] }
            if isBlocked(caller, blocks) { return [108] }
            expect = caller == owner ? [] : Self.recorded(isolated)
            if standing(caller, blocks) == .unknown { expect = expect.tolerating(115) }
        }
        return anyUnparseable(blocks) ? expect.tolerating(115) : expect
    }

    /// Data of an owner no longer managed: refused to others when it recorded isolation at creation.
    private static func recorded(_ isolated: Bool?) -> Expect {
        switch isolated {
        case true?: return [108]
        case false?: return []
        case nil: return Expect(codes: [108], mayAllow: true)
        }
    }

    /// `owner`'s data given to `recipient`: refused when either is blocked (`ProtectionError.accountBlocked(identity:reason:)` (109)),
    /// else by the owner's level (`ProtectionError.accessDenied(identity:reader:)` (108)), or by its recorded isolation.
    func transfer(owner: Identity?, to recipient: Identity?, isolated: Bool?, _ blocks: BlockBoard.Snapshot) -> Expect {
        guard let owner, !owner.isUnmanaged else { return [] }
        var expect: Expect
        switch standing(owner, blocks) {
        case .unknown:
            return unknown(owner, [recipient], blocks)
        case let .managed(tenant):
            if isBlocked(owner, blocks) || isBlocked(recipient, blocks) { return [109] }
            expect = Self.level(levelAllows(ownerTenant: tenant, owner: owner, reader: recipient, blocks))
            if standing(recipient, blocks) == .unknown { expect = expect.tolerating(115) }
        case .unmanaged:
            if isBlocked(owner, blocks) || isBlocked(recipient, blocks) { return [109] }
            expect = recipient == owner ? [] : Self.recorded(isolated)
            if standing(recipient, blocks) == .unknown { expect = expect.tolerating(115) }
        }
        return anyUnparseable(blocks) ? expect.tolerating(115) : expect
    }

    /// New data for `owner`: refused for a blocked owner (`ProtectionError.accountBlocked(identity:reason:)` (109)), and for an
    /// account whose policy document is broken (`ProtectionError.policyUnavailable(reason:)` (115)).
    func create(for owner: Identity?, _ blocks: BlockBoard.Snapshot) -> Expect {
        if standing(owner, blocks) == .unknown { return unknown(owner, [], blocks) }
        let expect: Expect = isBlocked(owner, blocks) ? [109] : []
        guard let owner, !owner.isUnmanaged, anyUnparseable(blocks) else { return expect }
        return expect.tolerating(115)
    }

    /// `caller` changes `owner`'s data into data of `newOwner`: a modification, and a transfer when the owner
    /// changes.
    func modify(owner: Identity?, by caller: Identity?, newOwner: Identity?, isolated: Bool?, _ blocks: BlockBoard.Snapshot) -> Expect {
        read(owner: owner, by: caller, isolated: isolated, blocks)
            .union(newOwner == owner ? [] : transfer(owner: owner, to: newOwner, isolated: isolated, blocks))
    }

    /// `isDataTransferAllowed(from:to:)`: never with a blocked side, never from or to an account whose document
    /// is broken, else by the source's level; `nil`: either answer (a document whose subject cannot be read).
    func isTransferAllowed(from source: Identity?, to target: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool? {
        if isBlocked(source, blocks) || isBlocked(target, blocks) { return false }
        // Nothing goes to an account whose policy cannot be read, as nothing goes to a blocked one.
        if let target, !target.isUnmanaged, standing(target, blocks) == .unknown { return false }
        let answer: Bool?
        switch standing(source, blocks) {
        case .unknown: answer = false
        case .unmanaged: answer = true
        case let .managed(tenant): answer = levelAllows(ownerTenant: tenant, owner: source!, reader: target, blocks)
        }
        guard anyUnparseable(blocks), let source, !source.isUnmanaged, answer == true else { return answer }
        return nil
    }

    /// Any operation on `owner`'s data through a manager whose policy source has never loaded: `ProtectionError.policyUnavailable(reason:)` (115) unless the
    /// data has no owner or is `""`'s.
    func unloaded(owner: Identity?) -> Expect {
        guard let owner, !owner.isUnmanaged else { return [] }
        return [115]
    }

    /// Whether files of `owner` must be encrypted at rest.
    func mustEncrypt(_ owner: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool {
        guard case let .managed(tenant) = standing(owner, blocks) else { return false }
        return encryptingTenants.contains(tenant)
    }

    /// The isolation data of `owner` records when it is created now: isolated when its owner is managed.
    func isolatedAtCreation(_ owner: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool? {
        switch standing(owner, blocks) {
        case .managed: return true
        case .unmanaged: return false
        case .unknown: return nil
        }
    }
}
