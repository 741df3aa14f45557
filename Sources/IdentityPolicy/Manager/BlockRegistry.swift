import IdentityRuntime

/// The causes of each account's block, but its policy's (``Policy/isAccountBlocked``, read from the
/// ``AccountIndex``): the block state machine. A plain value kept under the manager's lock.
///
/// An account is blocked while it has at least one cause here or its policy blocks it; with several causes,
/// the one with the lowest raw value is *the* reason (``BlockAccountReason``'s order). Adding a cause to a
/// blocked account changes no reason the manager announces unless that cause comes first; removing the last
/// cause unblocks it.
///
/// A wipe of a tenant (``PolicyManager/wipeData(forTenant:)``) gives every account of that tenant the cause
/// ``BlockAccountReason/wiped`` while it runs, also the accounts it did not find (first seen meanwhile): nothing
/// is created or admitted for the tenant during its wipe, so nothing of it survives the walk. That cause is the
/// tenant's, not the account's: it is not announced, and it ends with the wipe (the accounts the wipe found keep
/// their own).
struct BlockRegistry {
    private var causes: [Identity: Set<BlockAccountReason>] = [:]
    /// The tenants whose wipe is running, with the number of wipes of each.
    private var tenantsBeingWiped: [TenantID: Int] = [:]

    /// Whether no account has a cause (the common case: the switch path then skips every lookup).
    var isEmpty: Bool { causes.isEmpty && tenantsBeingWiped.isEmpty }

    /// The tenants whose wipe is running.
    var tenantsWiped: Dictionary<TenantID, Int>.Keys { tenantsBeingWiped.keys }

    /// The accounts with a cause of their own.
    var accounts: Dictionary<Identity, Set<BlockAccountReason>>.Keys { causes.keys }

    /// The causes of `account`'s block, `tenant` being its tenant (empty: none).
    func causes(of account: Identity, tenant: @autoclosure () -> TenantID) -> Set<BlockAccountReason> {
        var set = causes[account] ?? []
        if !tenantsBeingWiped.isEmpty, !account.isUnmanaged, tenantsBeingWiped[tenant()] != nil { set.insert(.wiped) }
        return set
    }

    /// The first cause of `account`'s block here, `tenant` being its tenant, or `nil`.
    func reason(for account: Identity, tenant: @autoclosure () -> TenantID) -> BlockAccountReason? {
        guard !tenantsBeingWiped.isEmpty else { return causes[account]?.min() }
        return causes(of: account, tenant: tenant()).min()
    }

    /// The reason `account` is blocked, given its standing and its tenant: its first cause here, else
    /// ``BlockAccountReason/blockedByPolicy`` when its policy blocks it, else `nil`.
    func reason(
        for account: Identity, standing: AccountIndex.Standing?, tenant: @autoclosure () -> TenantID
    ) -> BlockAccountReason? {
        if let cause = reason(for: account, tenant: tenant()) { return cause }
        return reason(for: account, standing: standing)
    }

    /// ``reason(for:standing:tenant:)`` without a wipe of the account's tenant: the account's own causes and its
    /// policy's, which are announced.
    func reason(for account: Identity, standing: AccountIndex.Standing?) -> BlockAccountReason? {
        if let cause = causes[account]?.min() { return cause }
        if case let .managed(policy) = standing, policy.isAccountBlocked { return .blockedByPolicy }
        return nil
    }

    /// Changes the causes of `account`'s block; an account left with none is forgotten.
    mutating func update(_ account: Identity, _ change: (inout Set<BlockAccountReason>) -> Void) {
        var set = causes[account] ?? []
        change(&set)
        causes[account] = set.isEmpty ? nil : set
    }

    /// Starts a wipe of `tenant`: its accounts are blocked (``BlockAccountReason/wiped``) until as many
    /// ``endWipe(of:)`` as ``beginWipe(of:)``.
    mutating func beginWipe(of tenant: TenantID) {
        tenantsBeingWiped[tenant, default: 0] += 1
    }

    /// Ends a wipe of `tenant` that ``beginWipe(of:)`` started.
    mutating func endWipe(of tenant: TenantID) {
        let count = (tenantsBeingWiped[tenant] ?? 1) - 1
        tenantsBeingWiped[tenant] = count > 0 ? count : nil
    }
}
