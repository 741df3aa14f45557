import IdentityRuntime

/// Every policy a ``PolicySource`` holds at one moment: accounts' own policies and tenants' policies.
///
/// Policies are stored without an identity; ``policy(for:tenant:)`` fills it in for the account asking.
public struct PolicySet: Sendable, Hashable {
    /// Each account's own policy.
    public var accounts: [Identity: Policy]
    /// Each tenant's policy, by tenant ID or by domain.
    public var tenants: [TenantID: Policy]

    public init(accounts: [Identity: Policy] = [:], tenants: [TenantID: Policy] = [:]) {
        self.accounts = accounts
        self.tenants = tenants
    }

    /// No policies.
    public static let empty = PolicySet()

    /// The policies of `documents`, each given with the path it was read from (a file, a table row), in the
    /// order the source decides.
    ///
    /// The first document for an account or a tenant wins; every later one for the same subject is left out
    /// and reported as ``PolicyDocumentError/duplicate(path:subject:otherPath:)``. Every ``PolicySource`` that
    /// reads documents builds its set here, so they all resolve duplicates the same way.
    public static func assembled(
        from documents: some Sequence<(path: String, document: PolicyDocument)>
    ) -> (policies: PolicySet, duplicates: [PolicyDocumentError]) {
        var accounts: [Identity: (policy: Policy, path: String)] = [:]
        var tenants: [TenantID: (policy: Policy, path: String)] = [:]
        var duplicates: [PolicyDocumentError] = []
        func add<Key: Hashable>(_ key: Key, to table: inout [Key: (policy: Policy, path: String)], path: String, document: PolicyDocument) {
            if let other = table[key] {
                duplicates.append(.duplicate(path: path, subject: document.subject.description, otherPath: other.path))
            } else {
                table[key] = (document.policy, path)
            }
        }
        for (path, document) in documents {
            switch document.subject {
            case let .account(identity): add(identity, to: &accounts, path: path, document: document)
            case let .tenant(tenant): add(tenant, to: &tenants, path: path, document: document)
            }
        }
        return (PolicySet(accounts: accounts.mapValues(\.policy), tenants: tenants.mapValues(\.policy)), duplicates)
    }

    /// The policy of `identity`: its own; else its tenant's, by `tenant` (its registered tenant ID) first and
    /// then by the domain of its name; else `nil`. `Identity.unmanaged` has none.
    public func policy(for identity: Identity, tenant: TenantID? = nil) -> Policy? {
        guard !identity.isUnmanaged else { return nil }
        var found = accounts[identity]
        if found == nil, let tenant { found = tenants[tenant] }
        if found == nil, !tenants.isEmpty, let domain = TenantID.domain(of: identity) { found = tenants[domain] }
        guard var policy = found else { return nil }
        policy.identity = identity
        return policy
    }

    /// The accounts and tenants whose policy differs between `self` and `other` (added, removed or changed).
    public func differences(from other: PolicySet) -> (accounts: Set<Identity>, tenants: Set<TenantID>) {
        func changed<Key: Hashable>(_ lhs: [Key: Policy], _ rhs: [Key: Policy]) -> Set<Key> {
            Set(lhs.keys).union(rhs.keys).filter { lhs[$0] != rhs[$0] }
        }
        return (changed(accounts, other.accounts), changed(tenants, other.tenants))
    }
}
