import IdentityRuntime

// Names `IdentityPolicy` had before: each forwards to its replacement and is deprecated with a fix-it to it.

extension PolicyManager {
    /// Deprecated: ``tenant(for:)``, which answers for every account.
    ///
    /// The answer is ``tenant(for:)``'s, never `nil`: an account without a registered tenant ID and without
    /// a domain gets a tenant of its own. It stays optional so that code written for the optional answer
    /// (`if let tenant = manager.tenant(of: account)`, `?.rawValue`) keeps compiling; a new name was needed
    /// because an overload differing only in its return type would make `manager.tenant(of: account)`
    /// ambiguous.
    @available(*, deprecated, renamed: "tenant(for:)", message: "every account has a tenant: tenant(for:) is not optional")
    public func tenant(of account: Identity) -> TenantID? {
        tenant(for: account)
    }
}
