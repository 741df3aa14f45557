/// Sees the outcome of every ``IdentityAssertionVerifier/verify(_:)`` of one verifier: for metrics and audit
/// trails (Integrations/IdentityMetrics makes one). Given to the verifier when it is made
/// (``IdentityAssertionVerifier/init(keySet:issuers:audience:mode:clockSkew:replayCacheCapacity:tokenCacheCapacity:maximumLifetime:observer:clock:)``),
/// so every caller of the verifier is observed, a middleware included.
///
/// - Exactly one call per `verify(_:)`: ``didAccept(_:fromCache:)`` before the assertion is returned, or
///   ``didRefuse(_:)`` before the error is thrown.
/// - Synchronously, on the verifying thread, never while the verifier holds its lock.
/// - The token itself is never passed: an observer cannot leak it.
///
/// Keep it quick and never block in it: it runs on the request's path.
///
/// ```swift
/// struct Refusals: AssertionVerificationObserver {
///     func didAccept(_ assertion: IdentityAssertion, fromCache: Bool) {}
///     func didRefuse(_ error: AssertionError) { print("token refused: \(error.code)") }
/// }
/// let verifier = IdentityAssertionVerifier(keys: keys, issuers: ["gateway"], audience: "documents", observer: Refusals())
/// ```
///
/// > Note: A verifier without an observer pays one comparison with `nil` per verification.
public protocol AssertionVerificationObserver: Sendable {
    /// `verify(_:)` accepted a token and returns `assertion`. `fromCache`: a reusable verifier
    /// (``IdentityAssertionVerifier/Mode/reusable``) recognized it from its token cache, without checking its
    /// signature again; `false` for a full verification (always in single-use mode).
    func didAccept(_ assertion: IdentityAssertion, fromCache: Bool)

    /// `verify(_:)` refused a token with `error`, the error it throws.
    func didRefuse(_ error: AssertionError)
}
