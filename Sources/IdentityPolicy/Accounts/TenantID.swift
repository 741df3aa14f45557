import IdentityRuntime

/// The organization an account belongs to: a tenant ID (such as an Entra directory ID,
/// `72f988bf-86f1-41af-91ab-2d7cd011db47`) or a domain (`contoso.com`).
///
/// An account's tenant is the ID given when it was registered or enrolled, and otherwise the domain of its
/// name (the part after the last `@`). Policy documents name tenants either way; a document naming the
/// tenant's ID wins over one naming its domain. An account with neither (`svc-backup`, an object ID used as a
/// name) is a tenant of its own, written as its name followed by `@` (`svc-backup@`). That tenant equals no
/// other: not a domain's, not one a policy document names, and not a tenant ID registered or sent in a token,
/// even one spelled `svc-backup@`; so the account shares a tenant with no other account (see
/// `PolicyManager.tenant(for:)`).
///
/// Tenant IDs compare like identities: case-insensitively, with Unicode case folding, locale-independent.
public struct TenantID: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// Folding and comparison are those of ``Identity``.
    private let storage: Identity
    /// Whether this is a domain-less account's own tenant, which equals no tenant made from a string.
    private let isAccountsOwn: Bool

    /// A tenant ID or domain. Surrounding white space is trimmed.
    public init(_ rawValue: some StringProtocol) {
        storage = Identity(rawValue)
        isAccountsOwn = false
    }

    private init(ownTenantOf identity: Identity) {
        storage = Identity(identity.name + "@")
        isAccountsOwn = true
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// The ID or domain as it was given (after trimming).
    public var rawValue: String { storage.name }

    /// Whether `TenantID(rawValue) == self`. A string spelled exactly as this tenant was given answers without
    /// making a tenant of it (trimming and case folding, for the token check at every request); any other
    /// spelling is compared as ``init(_:)`` makes it. A domain-less account's own tenant equals no string.
    package func isEqual(toRawValue rawValue: String) -> Bool {
        if !isAccountsOwn, storage.name == rawValue { return true }
        return self == TenantID(rawValue)
    }

    public var description: String { rawValue }

    /// The domain of `identity` (after its last `@`) as a tenant, or `nil` when the name has no domain.
    public static func domain(of identity: Identity) -> TenantID? {
        let name = identity.name
        guard let at = lastAt(in: name) else { return nil }
        let domain = name[name.index(after: at)...]
        return domain.isEmpty ? nil : TenantID(domain)
    }

    /// The index of the last `@` character of `name`. In an ASCII name every byte is a character (`@` is never
    /// part of the one two-byte cluster, CR LF), so it is found on the UTF-8 view: a request's tenant is looked up
    /// per request, and the search by characters (grapheme breaking) was most of its cost.
    private static func lastAt(in name: String) -> String.Index? {
        if name.utf8.allSatisfy({ $0 < 0x80 }) { return name.utf8.lastIndex(of: UInt8(ascii: "@")) }
        return name.lastIndex(of: "@")
    }

    /// The tenant of `identity` when nothing was registered for it: the domain of its name, else a tenant of
    /// its own, written `"<name>@"`, equal to no tenant made from a string.
    static func implied(by identity: Identity) -> TenantID {
        domain(of: identity) ?? TenantID(ownTenantOf: identity)
    }

    public static func < (lhs: TenantID, rhs: TenantID) -> Bool {
        lhs.storage.foldedName < rhs.storage.foldedName
            || (lhs.storage.foldedName == rhs.storage.foldedName && !lhs.isAccountsOwn && rhs.isAccountsOwn)
    }
}
