import IdentityRuntime

/// Gives ``IdentityClientInterceptor`` the bearer token of an account, for the service the client calls.
///
/// The interceptor asks only for the calling task's own identity, and sends the answer as
/// `authorization: Bearer <token>`. A provider must answer a token *of that account* or throw: the call then
/// fails locally with `unauthenticated` and nothing is sent, never another account's token.
/// ``ReusableTokenProvider`` signs tokens with an `IdentityAssertionSigner` and keeps each until shortly
/// before it expires; a provider of your own may ask a token service instead.
public protocol IdentityTokenProvider: Sendable {
    /// A bearer token for `account` (a compact JWS the called service's verifier accepts).
    func token(for account: Identity) async throws -> String
}
