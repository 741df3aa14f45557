import IdentityHTTP

/// The identity an RPC was admitted under, as ``IdentityServerInterceptor`` leaves it for the handler:
/// IdentityHTTP's `AdmittedIdentity` (the same type the HTTP middlewares use), named here so that importing
/// IdentityGRPC is enough. Its `source` is `.assertionHeader` for a token in the assertion metadata key
/// (`x-identity-assertion` unless configured otherwise) and `.bearerToken` for `authorization: Bearer <token>`.
///
/// Handlers read it from `AdmittedIdentity.current`; the same account is also the thread identity of the
/// handler and of everything it runs (`IdentityContext.currentThreadIdentity`), so code that never sees it (a
/// queue, an operation, a file write) still runs under the account.
///
/// ```swift
/// let admitted = AdmittedIdentity.current          // inside a handler behind the interceptor
/// // admitted?.account == IdentityContext.currentThreadIdentity
/// // admitted?.policy.isFileEncryptionRequired, admitted?.tenant
/// ```
public typealias AdmittedIdentity = IdentityHTTP.AdmittedIdentity

extension IdentityHTTP.AdmittedIdentity {
    /// The identity the current RPC was admitted under: set by ``IdentityServerInterceptor`` while the handler
    /// and its response body run, `nil` elsewhere.
    ///
    /// A task-local value, bound exactly where the account is the thread identity: while the handler runs and
    /// while its response body (the `StreamingServerResponse` producer) runs, and in the child tasks created
    /// there. A `Task.detached`, a raw `DispatchQueue` or a raw `Thread` sees `nil`. Code that switches the
    /// thread identity inside the handler does not change it: it still names the account the RPC was admitted
    /// for.
    @TaskLocal public static var current: AdmittedIdentity?
}
