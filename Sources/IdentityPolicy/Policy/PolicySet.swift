import IdentityRuntime

/// Every policy a ``PolicySource`` holds at one moment: accounts' own policies and tenants' policies, and the
/// accounts and tenants whose policy the source cannot read now.
///
/// Policies are stored without an identity; ``policy(for:tenant:)`` fills it in for the account asking.
///
/// A document that does not parse never leaves the accounts it may govern unmanaged: the account or tenant
/// it names is *undecided* (``unavailableAccounts``, ``unavailableTenants``), and a broken document whose
/// subject cannot be read makes the set incomplete (``isComplete``): every account without a good document of
/// its own is then undecided. A ``PolicyManager`` refuses every operation on an undecided account's data with
/// `ProtectionError.policyUnavailable`, as before its source's first load (``resolution(for:tenant:)``).
public struct PolicySet: Sendable, Hashable {
    /// Each account's own policy.
    public var accounts: [Identity: Policy]
    /// Each tenant's policy, by tenant ID or by domain.
    public var tenants: [TenantID: Policy]
    /// The accounts whose own document cannot be read now (and has no last good version): undecided, whatever
    /// ``accounts`` or their tenant's document say.
    public var unavailableAccounts: Set<Identity>
    /// The tenants whose document cannot be read now (and has no last good version): their accounts without a
    /// good document of their own are undecided.
    public var unavailableTenants: Set<TenantID>
    /// `false` when a document that cannot be read does not even say whom it governs: every account without a
    /// good document of its own (in ``accounts``) is undecided.
    public var isComplete: Bool

    /// A policy set; the defaults make an empty, complete one.
    public init(
        accounts: [Identity: Policy] = [:], tenants: [TenantID: Policy] = [:],
        unavailableAccounts: Set<Identity> = [], unavailableTenants: Set<TenantID> = [], isComplete: Bool = true
    ) {
        self.accounts = accounts
        self.tenants = tenants
        self.unavailableAccounts = unavailableAccounts
        self.unavailableTenants = unavailableTenants
        self.isComplete = isComplete
    }

    /// No policies.
    public static let empty = PolicySet()

    /// Whether some account is undecided: a document cannot be read.
    public var hasUnavailable: Bool {
        !isComplete || !unavailableAccounts.isEmpty || !unavailableTenants.isEmpty
    }

    /// The policies of `documents`, each given with the path it was read from (a file, a table row), in the
    /// order the source decides; no broken document.
    public static func assembled(
        from documents: some Sequence<(path: String, document: PolicyDocument)>
    ) -> (policies: PolicySet, duplicates: [PolicyDocumentError]) {
        assembled(from: documents, broken: [(path: String, subjects: Set<PolicyDocument.Subject>)]())
    }

    /// The policies of `documents` and the undecided subjects of `broken`, each given with the path it was
    /// read from (a file, a table row), in the order the source decides. Every ``PolicySource`` that reads
    /// documents builds its set here, so they all resolve duplicates and broken documents the same way.
    ///
    /// - `documents`: the documents in force: each one that parsed, and the last good version of one whose
    ///   current text does not parse. The first document for an account or a tenant wins; every later one for
    ///   the same subject is left out and reported as ``PolicyDocumentError/duplicate(path:subject:otherPath:)``.
    /// - `broken`: each document whose current text does not parse, with the subjects it names as far as
    ///   they can be read (``PolicyDocument/Reading/broken(_:subjects:)``; empty: unknown). A subject becomes
    ///   undecided, unless it is the subject of the last good version at the same path (a broken edit keeps the
    ///   last good document in force). A broken document with no readable subject and no last good version
    ///   makes the set incomplete.
    public static func assembled(
        from documents: some Sequence<(path: String, document: PolicyDocument)>,
        broken: some Sequence<(path: String, subjects: Set<PolicyDocument.Subject>)>
    ) -> (policies: PolicySet, duplicates: [PolicyDocumentError]) {
        var accounts: [Identity: (policy: Policy, path: String)] = [:]
        var tenants: [TenantID: (policy: Policy, path: String)] = [:]
        var inForce: [String: PolicyDocument.Subject] = [:]
        var duplicates: [PolicyDocumentError] = []
        func add<Key: Hashable>(_ key: Key, to table: inout [Key: (policy: Policy, path: String)], path: String, document: PolicyDocument) {
            if let other = table[key] {
                duplicates.append(.duplicate(path: path, subject: document.subject.description, otherPath: other.path))
            } else {
                table[key] = (document.policy, path)
            }
        }
        for (path, document) in documents {
            inForce[path] = document.subject
            switch document.subject {
            case let .account(identity): add(identity, to: &accounts, path: path, document: document)
            case let .tenant(tenant): add(tenant, to: &tenants, path: path, document: document)
            }
        }
        var set = PolicySet(accounts: accounts.mapValues(\.policy), tenants: tenants.mapValues(\.policy))
        for (path, subjects) in broken {
            let lastGood = inForce[path]
            if subjects.isEmpty, lastGood == nil { set.isComplete = false }
            for subject in subjects where subject != lastGood {
                switch subject {
                case let .account(identity): set.unavailableAccounts.insert(identity)
                case let .tenant(tenant): set.unavailableTenants.insert(tenant)
                }
            }
        }
        return (set, duplicates)
    }

    /// What the set says about one account.
    public enum Resolution: Sendable, Hashable {
        /// Its policy (its own, or its tenant's), with `identity` filled in.
        case policy(Policy)
        /// A document that may govern it cannot be read: nobody can tell whether, or how, it is managed.
        case undecided
        /// No document governs it.
        case none
    }

    /// What governs `identity`, in this order: undecided when its own document cannot be read; its own
    /// policy; undecided when the set is incomplete; then for its tenant, by `tenant` (its registered tenant ID)
    /// first and then by the domain of its name: undecided when that tenant's document cannot be read, else
    /// that tenant's policy; else none. `Identity.unmanaged` has none.
    public func resolution(for identity: Identity, tenant: TenantID? = nil) -> Resolution {
        guard !identity.isUnmanaged else { return .none }
        if !unavailableAccounts.isEmpty, unavailableAccounts.contains(identity) { return .undecided }
        if var policy = accounts[identity] {
            policy.identity = identity
            return .policy(policy)
        }
        guard isComplete else { return .undecided }
        for candidate in [tenant, TenantID.domain(of: identity)] {
            guard let candidate else { continue }
            if !unavailableTenants.isEmpty, unavailableTenants.contains(candidate) { return .undecided }
            if var policy = tenants[candidate] {
                policy.identity = identity
                return .policy(policy)
            }
        }
        return .none
    }

    /// The policy of `identity`: its own; else its tenant's, by `tenant` (its registered tenant ID) first and
    /// then by the domain of its name; else `nil`. `Identity.unmanaged` has none. An undecided account has
    /// none either: ask ``resolution(for:tenant:)`` to tell it from an account no document governs.
    public func policy(for identity: Identity, tenant: TenantID? = nil) -> Policy? {
        if case let .policy(policy) = resolution(for: identity, tenant: tenant) { return policy }
        return nil
    }

    /// The accounts and tenants whose policy differs between `self` and `other` (added, removed, changed, or
    /// become or no longer undecided).
    public func differences(from other: PolicySet) -> (accounts: Set<Identity>, tenants: Set<TenantID>) {
        func changed<Key: Hashable>(_ lhs: [Key: Policy], _ rhs: [Key: Policy]) -> Set<Key> {
            Set(lhs.keys).union(rhs.keys).filter { lhs[$0] != rhs[$0] }
        }
        return (
            changed(accounts, other.accounts).union(unavailableAccounts.symmetricDifference(other.unavailableAccounts)),
            changed(tenants, other.tenants).union(unavailableTenants.symmetricDifference(other.unavailableTenants))
        )
    }
}
