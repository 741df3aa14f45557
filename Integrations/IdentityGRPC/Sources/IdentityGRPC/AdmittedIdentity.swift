import IdentityAssertions
import IdentityPolicy
import IdentityRuntime

/// The identity an RPC was admitted under, as ``IdentityServerInterceptor`` leaves it for the handler.
///
/// Handlers read it from ``current``; the same account is also the thread identity of the handler and of
/// everything it runs (`IdentityContext.currentThreadIdentity`), so code that never sees it (a queue, an
/// operation, a file write) still runs under the account.
///
/// ```swift
/// let admitted = AdmittedIdentity.current          // inside a handler behind the interceptor
/// // admitted?.account == IdentityContext.currentThreadIdentity
/// // admitted?.policy.isFileEncryptionRequired, admitted?.tenant
/// ```
///
/// > Note: ``current`` is a task-local value, bound exactly where the account is the thread identity: while
/// > the handler runs and while its response body (the `StreamingServerResponse` producer) runs, and in the
/// > child tasks created there. A `Task.detached`, a raw `DispatchQueue` or a raw `Thread` sees `nil`. Code
/// > that switches the thread identity inside the handler does not change ``current``: it still names the
/// > account the RPC was admitted for.
public struct AdmittedIdentity: Sendable {
    /// Where the identity came from.
    public enum Source: String, Sendable, Hashable {
        /// A verified assertion in the assertion metadata key (`x-identity-assertion` unless configured
        /// otherwise).
        case assertionMetadata
        /// A verified assertion sent as `authorization: Bearer <token>`.
        case bearerToken
    }

    /// The account the RPC is for (the assertion's `sub`).
    public let account: Identity
    /// The runtime's tenant of the account (`PolicyManager.tenant(for:)`: its registered tenant ID, else the
    /// domain of its name).
    public let tenant: String
    /// The account's policy (`PolicyManager.policy(for:)`), fixed when the RPC was admitted.
    public let policy: Policy
    /// The verified assertion (issuer, audience, expiry, token ID). Never forward its token (a single-use
    /// verifier has used it up, and its audience is this service); a call to another service gets a new one
    /// from ``IdentityClientInterceptor``.
    public let assertion: IdentityAssertion
    /// Which metadata key carried it.
    public let source: Source

    public init(account: Identity, tenant: String, policy: Policy, assertion: IdentityAssertion, source: Source) {
        self.account = account
        self.tenant = tenant
        self.policy = policy
        self.assertion = assertion
        self.source = source
    }

    /// The identity the current RPC was admitted under: set by ``IdentityServerInterceptor`` while the handler
    /// and its response body run, `nil` elsewhere.
    @TaskLocal public static var current: AdmittedIdentity?
}
