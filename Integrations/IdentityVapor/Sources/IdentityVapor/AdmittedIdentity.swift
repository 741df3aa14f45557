import IdentityHTTP
import IdentityPolicy
import IdentityAssertions
import IdentityRuntime
import Vapor

/// The identity a request was admitted under, as ``IdentityMiddleware`` leaves it on the request
/// (``Vapor/Request/admittedIdentity``): IdentityHTTP's `AdmittedIdentity`, named here so that importing
/// IdentityVapor is enough.
public typealias AdmittedIdentity = IdentityHTTP.AdmittedIdentity

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
