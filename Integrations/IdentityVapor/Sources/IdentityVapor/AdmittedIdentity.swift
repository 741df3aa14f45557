import IdentityPolicy
import IdentityAssertions
import IdentityRuntime
import Vapor

/// The identity a request was admitted under, as ``IdentityMiddleware`` leaves it on the request
/// (``Vapor/Request/admittedIdentity``).
///
/// The same account is also the thread identity of the rest of the responder chain
/// (`IdentityContext.currentThreadIdentity`), so code that never sees the request (a queue, an operation, a
/// file write) still runs under it.
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
    /// The verified assertion (issuer, audience, expiry, token ID). Its token is used up: never forward it; a
    /// call to another service signs a new one for that service's audience.
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

/// The request storage key of ``Vapor/Request/admittedIdentity``. Internal: only ``IdentityMiddleware``
/// writes it, so a handler or another middleware cannot make a request look admitted.
enum AdmittedIdentityKey: StorageKey {
    typealias Value = AdmittedIdentity
}

extension Request {
    /// The identity ``IdentityMiddleware`` admitted this request under: account, tenant, ``Policy``, the
    /// verified assertion and which header carried it.
    ///
    /// Set by the middleware before it calls the rest of the chain, and only by it (the setter is internal):
    /// `nil` in middleware in front of it, in routes that are not behind it, and for every refused request
    /// (whose handler never runs). Readable from any thread; it stays set after the response, for
    /// middleware in front that wants to log it. The identity itself runs with the chain: inside the
    /// handler `IdentityContext.currentThreadIdentity == request.admittedIdentity?.account`.
    public internal(set) var admittedIdentity: AdmittedIdentity? {
        get { storage[AdmittedIdentityKey.self] }
        set { storage[AdmittedIdentityKey.self] = newValue }
    }

    /// The admitted account's `Policy`, fixed when the request was admitted: `admittedIdentity?.policy`.
    /// `nil` where ``admittedIdentity`` is `nil`; never a default policy for an unadmitted request.
    public var identityPolicy: Policy? { admittedIdentity?.policy }
}
