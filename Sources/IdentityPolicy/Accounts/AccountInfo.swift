import IdentityRuntime

/// What the manager knows of an account beside its name: its tenant and its directory object ID.
///
/// Register an account with ``PolicyManager/registerAccount(_:tenantID:objectID:)`` (enrollment does it too)
/// to give it an explicit tenant, or to look it up by object ID (the Intune App SDK keys accounts by their
/// Entra object ID since 20.x).
public struct AccountInfo: Sendable, Hashable {
    /// The account.
    public var identity: Identity
    /// The tenant it was registered with, or `nil` when its tenant is the domain of its name.
    public var tenantID: TenantID?
    /// Its directory object ID, if known. Compared case-insensitively.
    public var objectID: String?

    /// An account's registration: its name, and its tenant and directory object ID when known.
    public init(identity: Identity, tenantID: TenantID? = nil, objectID: String? = nil) {
        self.identity = identity
        self.tenantID = tenantID
        self.objectID = objectID
    }

    /// ``tenantID`` when given, else the domain of its name; `nil` for a name without a domain, where
    /// ``PolicyManager/tenant(for:)`` answers the account's own tenant (`name@`).
    public var tenant: TenantID? {
        tenantID ?? TenantID.domain(of: identity)
    }
}
