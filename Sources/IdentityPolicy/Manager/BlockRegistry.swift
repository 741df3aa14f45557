import IdentityRuntime

/// The causes of each account's block, but its policy's (``Policy/isAccountBlocked``, read from the
/// ``AccountIndex``): the block state machine. A plain value kept under the manager's lock.
///
/// An account is blocked while it has at least one cause here or its policy blocks it; with several causes,
/// the one with the lowest raw value is *the* reason (``BlockAccountReason``'s order). Adding a cause to a
/// blocked account changes no reason the manager announces unless that cause comes first; removing the last
/// cause unblocks it.
struct BlockRegistry {
    private var causes: [Identity: Set<BlockAccountReason>] = [:]

    /// Whether no account has a cause (the common case: the switch path then skips every lookup).
    var isEmpty: Bool { causes.isEmpty }

    /// The accounts with at least one cause.
    var accounts: Dictionary<Identity, Set<BlockAccountReason>>.Keys { causes.keys }

    /// The causes of `account`'s block (empty: none).
    func causes(of account: Identity) -> Set<BlockAccountReason> {
        causes[account] ?? []
    }

    /// The first cause of `account`'s block here, or `nil`.
    func reason(for account: Identity) -> BlockAccountReason? {
        causes[account]?.min()
    }

    /// The reason `account` is blocked, given its standing: its first cause here, else
    /// ``BlockAccountReason/blockedByPolicy`` when its policy blocks it, else `nil`.
    func reason(for account: Identity, standing: AccountIndex.Standing?) -> BlockAccountReason? {
        if let cause = reason(for: account) { return cause }
        if case let .managed(policy) = standing, policy.isAccountBlocked { return .blockedByPolicy }
        return nil
    }

    /// Changes the causes of `account`'s block; an account left with none is forgotten.
    mutating func update(_ account: Identity, _ change: (inout Set<BlockAccountReason>) -> Void) {
        var set = causes[account] ?? []
        change(&set)
        causes[account] = set.isEmpty ? nil : set
    }
}
