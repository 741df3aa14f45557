import Dispatch
import IdentityRuntime

/// How one account's standing changed in one update, computed under the manager's lock and announced after it.
struct AccountTransition: Sendable {
    let account: Identity
    let wasManaged: Bool
    let isManaged: Bool
    let policyChanged: Bool
    let oldBlock: BlockAccountReason?
    let newBlock: BlockAccountReason?
}

extension PolicyManager {
    // MARK: Blocked accounts

    /// The blocked accounts the manager knows, sorted by name: every account blocked by a cause of
    /// ``BlockAccountReason``, including known accounts whose policy blocks them and known accounts of a tenant
    /// whose wipe is running (``wipeData(forTenant:)``).
    public var blockedAccounts: [Identity] {
        state.withLock { state in
            var blocked = Set(state.blocks.accounts)
            for tenant in state.blocks.tenantsWiped { blocked.formUnion(state.accounts.known(inTenant: tenant)) }
            for (account, standing) in state.accounts.standings {
                if case let .managed(policy) = standing, policy.isAccountBlocked { blocked.insert(account) }
            }
            return blocked.sorted { $0.foldedName < $1.foldedName }
        }
    }

    /// Why `account` is blocked: ``BlockAccountReason/notBlocked`` when it is not (always for the unmanaged
    /// identity). With several causes, the one with the lowest raw value (see ``BlockAccountReason``).
    public func blockReason(for account: Identity) -> BlockAccountReason {
        guard !account.isUnmanaged else { return .notBlocked }
        return state.withLock { $0.blockReason(for: account) } ?? .notBlocked
    }

    /// Blocks `account` for `reason` (typically ``BlockAccountReason/clockedOut`` or
    /// ``BlockAccountReason/blockedByAdministrator``) until ``unblockAccount(_:reason:)`` clears that cause.
    ///
    /// While blocked: the account is in ``blockedAccounts``; a switch to it is
    /// ``SwitchIdentityResult/notAllowed``; its data and files are refused with
    /// `ProtectionError.accountBlocked(identity:reason:)`. When the account was not
    /// blocked before, the ``delegate``'s ``PolicyDelegate/blockAccount(_:reason:window:completionHandler:)``
    /// is called once, and `.blockedAccountsDidChange` and ``PolicyEvent/accountBlocked(_:reason:)`` are
    /// posted. ``BlockAccountReason/notBlocked``, ``BlockAccountReason/blockedByPolicy`` (which comes from the
    /// policy) and `Identity.unmanaged` are ignored.
    public func blockAccount(_ account: Identity, reason: BlockAccountReason) {
        block(account, reason: reason, window: nil)
    }

    /// Clears `reason` (`nil`: every cause but the policy's) from `account`'s block. The account is unblocked
    /// when no cause remains: `.blockedAccountsDidChange` and ``PolicyEvent/accountUnblocked(_:)`` are posted.
    public func unblockAccount(_ account: Identity, reason: BlockAccountReason? = nil) {
        updateBlocks(of: account, window: nil) { causes in
            if let reason { causes.remove(reason) } else { causes.removeAll() }
        }
    }

    /// Adds a cause of ``BlockAccountReason`` to `account`'s block; `window` is the window involved, if any.
    func block(_ account: Identity, reason: BlockAccountReason, window: WindowID?) {
        guard !account.isUnmanaged, reason != .notBlocked, reason != .blockedByPolicy else { return }
        updateBlocks(of: account, window: window) { $0.insert(reason) }
    }

    private func updateBlocks(of account: Identity, window: WindowID?, _ change: (inout Set<BlockAccountReason>) -> Void) {
        let transition = state.withLock { $0.changeBlock(of: account, change) }
        announce([transition], policiesChanged: false, window: window)
    }

    // MARK: Updating and announcing accounts

    /// Runs `body` on the state under the lock; `body` returns its own result and the index's changes. Returns
    /// that result and the transitions of the changed accounts (managed, policy, block), to ``announce(_:policiesChanged:tenants:window:)``
    /// after the lock is released.
    func updateAccounts<T>(_ body: (inout PolicyState) -> (T, AccountIndex.Changes)) -> (T, [AccountTransition]) {
        state.withLock { state in
            let (result, changes) = body(&state)
            let transitions = changes.map { account, old -> AccountTransition in
                let new = state.accounts.standing(of: account)
                return AccountTransition(
                    account: account, wasManaged: Self.isManaged(old), isManaged: Self.isManaged(new),
                    policyChanged: Self.policy(old) != Self.policy(new),
                    oldBlock: state.blocks.reason(for: account, standing: old),
                    newBlock: state.announcedBlockReason(for: account))
            }.sorted { $0.account.foldedName < $1.account.foldedName }
            return (result, transitions)
        }
    }

    /// Managed, or undecided (it may be: see ``PolicyManager/isIdentityManaged(_:)``).
    private static func isManaged(_ standing: AccountIndex.Standing?) -> Bool {
        switch standing {
        case .managed, .undecided: true
        case .claimed, nil: false
        }
    }

    private static func policy(_ standing: AccountIndex.Standing?) -> Policy? {
        if case let .managed(policy) = standing { return policy }
        return nil
    }

    /// Posts what changed, outside every lock, in this order: `.policyDidChange` (with the accounts and tenants
    /// whose policy changed) and ``PolicyEvent/accountPoliciesDidChange(accounts:tenants:)``; then each account
    /// managed or unmanaged; then each account blocked or unblocked. The delegate's `blockAccount` is called
    /// from a task of its own when an account becomes blocked; the event does not wait for its answer.
    func announce(
        _ transitions: [AccountTransition], policiesChanged: Bool, tenants: Set<TenantID> = [], window: WindowID? = nil
    ) {
        if policiesChanged {
            let accounts = transitions.filter(\.policyChanged).map(\.account)
            let tenants = tenants.sorted()
            broadcaster.send(.policyDidChange, object: self, userInfo: [
                "accounts": accounts.map(\.name), "tenants": tenants.map(\.rawValue),
            ])
            send(.accountPoliciesDidChange(accounts: accounts, tenants: tenants))
        }
        for transition in transitions where transition.wasManaged != transition.isManaged {
            send(transition.isManaged ? .accountManaged(transition.account) : .accountUnmanaged(transition.account))
        }
        for transition in transitions where transition.oldBlock != transition.newBlock {
            if let reason = transition.newBlock {
                if transition.oldBlock == nil { askDelegateToBlock(transition.account, reason: reason, window: window) }
                send(.accountBlocked(transition.account, reason: reason))
            } else {
                send(.accountUnblocked(transition.account))
            }
        }
    }

    /// Calls the delegate's `blockAccount` once; a `.failed` answer (or none in time) keeps the block and asks
    /// for a restart.
    private func askDelegateToBlock(_ account: Identity, reason: BlockAccountReason, window: WindowID?) {
        let (delegate, timeout) = state.withLock { ($0.delegate, $0.settings.delegateTimeout) }
        guard let delegate else { return }
        backgroundWork.start { [weak self] in
            let result = await DelegateAnswer<BlockAccountResult>.wait(
                operation: "blockAccount(\(String(reflecting: account.name)), reason: \(reason))",
                timeout: timeout, onTimeout: .failed, onCancel: .failed
            ) { answer in
                delegate.blockAccount(account, reason: reason, window: window, completionHandler: answer)
            }
            if result == .failed { self?.restartApplication() }
        }
    }
}

extension PolicyState {
    /// Changes the causes of `account`'s own block and forgets its admission pass (a block change decides its
    /// admission again); returns the transition to announce once the lock is released.
    mutating func changeBlock(of account: Identity, _ change: (inout Set<BlockAccountReason>) -> Void) -> AccountTransition {
        let old = announcedBlockReason(for: account)
        blocks.update(account, change)
        admission.forgetPass(of: account)
        let managed = accounts.isManaged(account)
        return AccountTransition(
            account: account, wasManaged: managed, isManaged: managed, policyChanged: false,
            oldBlock: old, newBlock: announcedBlockReason(for: account))
    }
}
