import IdentityPolicy
import IdentityAssertions
import IdentityRuntime

/// The identity a request was admitted under, as ``IdentityMiddleware`` leaves it in the request context.
///
/// Handlers read it from ``IdentityRequestContext/admittedIdentity``; the same account is also the thread
/// identity of the rest of the chain (`IdentityContext.currentThreadIdentity`), so code that never sees the
/// context (a queue, an operation, a file write) still runs under it.
public struct AdmittedIdentity: Sendable {
    /// Where the identity came from.
    public enum Source: String, Sendable, Hashable {
        /// A verified assertion in the assertion header (`x-identity-assertion` unless configured otherwise).
        case assertionHeader
        /// A verified assertion sent as `Authorization: Bearer <token>`.
        case bearerToken
    }

    /// The account the request is for (the assertion's `sub`).
    public let account: Identity
    /// Its tenant: the runtime's tenant of the account (`PolicyManager.tenant(for:)`: its registered tenant ID,
    /// else the domain of its name, else its own tenant, `name@`). The middleware always sets it; it stays
    /// optional for code that makes one itself.
    public let tenant: String?
    /// The account's policy (``PolicyManager/policy(for:)-(Identity?)``), fixed when the request was admitted.
    public let policy: Policy
    /// The verified assertion (issuer, audience, expiry, token ID). Never forward its token (a single-use
    /// verifier has used it up, and its audience is this service); a call to another service signs a new one
    /// for that service's audience.
    public let assertion: IdentityAssertion
    /// Which header carried it.
    public let source: Source

    public init(account: Identity, tenant: String?, policy: Policy, assertion: IdentityAssertion, source: Source) {
        self.account = account
        self.tenant = tenant
        self.policy = policy
        self.assertion = assertion
        self.source = source
    }
}
