import IdentityAssertions

/// Counts an `IdentityAssertionVerifier`'s verifications: give it to the verifier as its `observer`
/// (``IdentityRuntimeMetrics/verificationObserver``).
///
/// - ``IdentityMetricNames/tokenVerifications`` by `outcome`: `accepted`, or the refusal's `AssertionError` case
///   (`malformed`, `badSignature`, `expired`, `replayed`, `wrongAudience`, ... : ``outcome(of:)``).
/// - ``IdentityMetricNames/tokenCacheHits``: accepted tokens a reusable verifier recognized from its cache
///   (counted among the accepted verifications too).
///
/// No tenant dimension: a refused token's claims are not trusted, and an accepted one's account is counted at
/// admission.
public struct AssertionVerificationMetrics: AssertionVerificationObserver {
    let metrics: IdentityRuntimeMetrics

    public func didAccept(_ assertion: IdentityAssertion, fromCache: Bool) {
        metrics.tokenVerifications([Self.accepted]).increment()
        if fromCache { metrics.tokenCacheHits.increment() }
    }

    public func didRefuse(_ error: AssertionError) {
        metrics.tokenVerifications([Self.outcome(of: error)]).increment()
    }

    /// The `outcome` of an accepted verification.
    public static let accepted = "accepted"

    /// The `outcome` value of a refusal: the name of `error`'s case, without its associated values (which may
    /// hold a token's claims).
    public static func outcome(of error: AssertionError) -> String {
        switch error {
        case .malformed: "malformed"
        case .unsupportedAlgorithm: "unsupportedAlgorithm"
        case .unsupportedHeader: "unsupportedHeader"
        case .unknownKey: "unknownKey"
        case .badSignature: "badSignature"
        case .expired: "expired"
        case .notYetValid: "notYetValid"
        case .wrongAudience: "wrongAudience"
        case .wrongIssuer: "wrongIssuer"
        case .replayed: "replayed"
        case .replayCacheFull: "replayCacheFull"
        case .invalidAccount: "invalidAccount"
        case .lifetimeTooLong: "lifetimeTooLong"
        case .invalidTenant: "invalidTenant"
        case .invalidKey: "invalidKey"
        case .cryptoBackendFailure: "cryptoBackendFailure"
        case .unsignable: "unsignable"
        case .invalidKeySet: "invalidKeySet"
        }
    }
}
