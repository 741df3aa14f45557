import IdentityPolicy
import IdentityRuntime
import Logging

extension Logger.MetadataProvider {
    /// The metadata key of the effective identity's account name.
    public static let identityKey = "identity"
    /// The metadata key of the account's tenant (a tenant ID or domain).
    public static let tenantKey = "tenant"

    /// A metadata provider that adds, to every log line, the identity the logging code runs under.
    ///
    /// - `identity`: the *effective file identity* (``IdentityContext/effectiveFileIdentity``): the thread
    ///   identity of the current thread or task if set, else the process identity. That is the identity work
    ///   (files, requests, data) is done for; the UI identity never takes part, so a line logged on the main
    ///   thread does not name the window's account unless the thread or process identity says so. An
    ///   explicitly unmanaged identity (``Identity/unmanaged``) is logged as `identity=""`.
    /// - `tenant`: when `policyManager` is given, the account's tenant (``PolicyManager/tenant(for:)``: its
    ///   registered tenant ID, else the domain of its name, else its own); absent for the unmanaged identity.
    ///
    /// With no identity set, the provider returns an empty dictionary literal and adds nothing: no key, no
    /// allocation, just the task-local and process-identity reads.
    ///
    /// The identity follows the runtime's propagation rules: a `Task {}` created inside
    /// `withThreadIdentity`, a block submitted through an `IdentityDispatchQueue` or `IdentityOperationQueue`,
    /// all log the submitter's identity; `Task.detached` and raw `DispatchQueue` blocks log none (or the
    /// process identity).
    ///
    /// ```swift
    /// let logger = Logger(label: "documents", metadataProvider: .identity(policyManager: .shared))
    /// IdentityContext.withThreadIdentity("alice@contoso.com") {
    ///     logger.info("opened")   // identity=alice@contoso.com tenant=contoso.com opened
    /// }
    /// ```
    ///
    /// > Note: combine it with other providers with `Logger.MetadataProvider.multiplex([...])`, or install it
    /// > process-wide with `LoggingSystem.bootstrap(_:metadataProvider:)`.
    public static func identity(policyManager: PolicyManager? = nil) -> Logger.MetadataProvider {
        Logger.MetadataProvider {
            guard let identity = IdentityContext.effectiveFileIdentity else { return [:] }
            guard let policyManager, !identity.isUnmanaged else {
                return [identityKey: .string(identity.name)]
            }
            return [identityKey: .string(identity.name), tenantKey: .string(policyManager.tenant(for: identity).rawValue)]
        }
    }
}
