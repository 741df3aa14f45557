import IdentityHTTP

/// The identity a request was admitted under, as ``IdentityMiddleware`` leaves it in the request context
/// (``IdentityRequestContext/admittedIdentity``): IdentityHTTP's `AdmittedIdentity`, named here so that
/// importing IdentityHummingbird is enough.
public typealias AdmittedIdentity = IdentityHTTP.AdmittedIdentity
