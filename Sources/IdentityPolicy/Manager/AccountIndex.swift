import IdentityRuntime

/// The manager's index of accounts: which are managed (and under which policy), which are claimed, their
/// tenants and object IDs. A plain value kept under the manager's lock; every lookup is a hash lookup, and
/// every change recomputes only the accounts it can affect (all of them only when the policies or the
/// settings change).
///
/// Rules (Sources/IdentityRuntime/IdentityRuntime.docc/IdentitiesAndPropagation.md, <doc:AccountsAndPolicies>):
/// - An account is managed when it is enrolled, or when the policy source has a policy for it (its own, or
///   its tenant's: the registered tenant ID first, then the domain of its name).
/// - With a limit (``RuntimeSettings/maxManagedAccounts``), only enrolled accounts are managed, the first
///   `limit` of them in enrollment order. An account that has a policy, is enrolled beyond the limit, or is
///   registered for enrollment and not yet enrolled is *claimed*: managed elsewhere, not here.
/// - Without a limit, an account registered for enrollment and not yet enrolled, with no policy, is claimed
///   until its enrollment ends.
/// - A managed account without any policy gets ``Policy/unrestricted``, or ``Policy/locked(for:)`` when a
///   policy is required.
/// - An account a document that cannot be read may govern (``PolicySet/resolution(for:tenant:)`` answers
///   `undecided`) is *undecided*, enrolled or not, whatever the limit: its data is refused as before the
///   policy source's first load.
struct AccountIndex {
    enum Standing: Equatable {
        /// Boxed (`indirect`): every decision copies a standing out of the index, and a copy of the box is one
        /// retain where a copy of the policy retained each of its fields.
        indirect case managed(Policy)
        case claimed
        /// A document that may govern the account cannot be read: nobody can tell how it is managed.
        case undecided
    }

    /// Every known account that is managed or claimed. Unknown accounts are looked up by their domain.
    private(set) var standings: [Identity: Standing] = [:]
    private(set) var policies = PolicySet.empty
    /// Enrolled accounts in enrollment order; the first is the primary user.
    private(set) var enrolled: [Identity] = []
    private(set) var registry: [Identity: AccountInfo] = [:]
    private var objectIDs: [Identity: Identity] = [:]
    private(set) var pending: Set<Identity> = []
    private(set) var limit: Int?
    private(set) var policyRequired = false
    /// The enrolled accounts that are managed: all of them, or the first `limit`.
    private var managedByEnrollment: Set<Identity> = []

    /// Old standings of the accounts an update changed (`nil`: the account was unmanaged).
    typealias Changes = [Identity: Standing?]

    // MARK: Lookups

    func standing(of identity: Identity) -> Standing? {
        standings[identity] ?? Self.byDomain(identity, policies: policies, limit: limit)
    }

    /// The standing of an account the index does not know: its domain's tenant policy, if any (or undecided).
    private static func byDomain(_ identity: Identity, policies: PolicySet, limit: Int?) -> Standing? {
        guard !policies.tenants.isEmpty || policies.hasUnavailable else { return nil }
        switch policies.resolution(for: identity) {
        case .undecided: return .undecided
        case .none: return nil
        case let .policy(policy): return limit == nil ? .managed(policy) : .claimed
        }
    }

    /// Whether `identity` is managed here under a policy known now.
    func isManaged(_ identity: Identity) -> Bool {
        if case .managed = standing(of: identity) { return true }
        return false
    }

    /// Whether `identity` is undecided: a document that may govern it cannot be read.
    func isUndecided(_ identity: Identity) -> Bool {
        standing(of: identity) == .undecided
    }

    /// The known managed accounts, sorted by name.
    var managedAccounts: [Identity] {
        standings.compactMap { entry in
            if case .managed = entry.value { return entry.key }
            return nil
        }.sorted { $0.foldedName < $1.foldedName }
    }

    func account(forObjectID objectID: String) -> Identity? {
        objectIDs[Identity(objectID)]
    }

    /// The registered tenant ID, else the domain of the name, else the account's own tenant.
    func tenant(of identity: Identity) -> TenantID {
        registry[identity]?.tenantID ?? TenantID.implied(by: identity)
    }

    /// The accounts the index knows (managed, claimed or registered) whose tenant is `tenant`.
    func known(inTenant tenant: TenantID) -> Set<Identity> {
        Set(standings.keys.filter { self.tenant(of: $0) == tenant } + registry.keys.filter { self.tenant(of: $0) == tenant })
    }

    // MARK: Updates

    mutating func setPolicies(_ policies: PolicySet) -> Changes {
        let previous = (policies: self.policies, limit: limit)
        self.policies = policies
        return recompute(allKnown, previous: previous)
    }

    mutating func configure(limit: Int?, policyRequired: Bool) -> Changes {
        guard limit != self.limit || policyRequired != self.policyRequired else { return [:] }
        let previous = (policies: policies, limit: self.limit)
        self.limit = limit
        self.policyRequired = policyRequired
        managedByEnrollment = Set(limit.map { Array(enrolled.prefix($0)) } ?? enrolled)
        return recompute(allKnown, previous: previous)
    }

    mutating func setEnrolled(_ accounts: [Identity]) -> Changes {
        let before = Set(enrolled)
        enrolled = accounts
        managedByEnrollment = Set(limit.map { Array(accounts.prefix($0)) } ?? accounts)
        return recompute(before.union(accounts), previous: (policies, limit))
    }

    mutating func register(_ info: AccountInfo) -> Changes {
        if let old = registry[info.identity]?.objectID { objectIDs[Identity(old)] = nil }
        registry[info.identity] = info
        if let objectID = info.objectID { objectIDs[Identity(objectID)] = info.identity }
        return recompute([info.identity], previous: (policies, limit))
    }

    /// Puts `previous` (`nil`: none) back as the registration of `identity`, if its registration is still
    /// `current`: whoever registered it since keeps theirs.
    mutating func restoreRegistration(of identity: Identity, to previous: AccountInfo?, ifStill current: AccountInfo) -> Changes {
        guard registry[identity] == current else { return [:] }
        if let old = current.objectID { objectIDs[Identity(old)] = nil }
        registry[identity] = previous
        if let objectID = previous?.objectID { objectIDs[Identity(objectID)] = identity }
        return recompute([identity], previous: (policies, limit))
    }

    mutating func setPending(_ accounts: Set<Identity>) -> Changes {
        let touched = pending.symmetricDifference(accounts)
        pending = accounts
        return recompute(touched, previous: (policies, limit))
    }

    // MARK: Computing standings

    private func compute(_ identity: Identity) -> Standing? {
        let policy: Policy?
        switch policies.resolution(for: identity, tenant: registry[identity]?.tenantID) {
        case .undecided: return .undecided
        case let .policy(found): policy = found
        case .none: policy = nil
        }
        if managedByEnrollment.contains(identity) {
            return .managed(policy ?? (policyRequired ? .locked(for: identity) : .unrestricted))
        }
        if limit == nil, let policy { return .managed(policy) }
        if policy != nil || pending.contains(identity) || enrolled.contains(identity) { return .claimed }
        return nil
    }

    /// Recomputes `accounts`; `previous` is what unknown accounts were looked up with before the update.
    private mutating func recompute(
        _ accounts: some Sequence<Identity>, previous: (policies: PolicySet, limit: Int?)
    ) -> Changes {
        var changes: Changes = [:]
        for identity in accounts {
            let old = standings[identity] ?? Self.byDomain(identity, policies: previous.policies, limit: previous.limit)
            let new = compute(identity)
            standings[identity] = new
            if old != new { changes[identity] = .some(old) }
        }
        return changes
    }

    /// Every account the index knows, including those whose standing may have just ended.
    private var allKnown: Set<Identity> {
        var known = Set(standings.keys)
        known.formUnion(enrolled)
        known.formUnion(registry.keys)
        known.formUnion(pending)
        known.formUnion(policies.accounts.keys)
        known.formUnion(policies.unavailableAccounts)
        return known
    }
}
