import Foundation

/// Why an identity assertion could not be signed or was refused, or a key set was refused. Every case has a stable ``code``.
///
/// | code | case | meaning |
/// |---|---|---|
/// | 1 | ``malformed(_:)`` | not three canonical base64url parts, not JSON objects, too long, a claim missing or of the wrong type |
/// | 2 | ``unsupportedAlgorithm(_:)`` | `alg` is not `EdDSA` (`none`, `HS256`, `RS256`, …) |
/// | 3 | ``unsupportedHeader(_:)`` | a header member other than `alg`, `kid`, `typ` (`jwk`, `jku`, `x5u`, `crit`, …), or `typ` not `JWT` |
/// | 4 | ``unknownKey(_:)`` | no verification key with that `kid` (never had, or removed by rotation) |
/// | 5 | ``badSignature`` | the signature does not verify: forged or tampered |
/// | 6 | ``expired(at:)`` | `exp` is past (beyond the clock skew) |
/// | 7 | ``notYetValid(until:)`` | `nbf`, or `iat`, is in the future (beyond the clock skew) |
/// | 8 | ``wrongAudience(_:)`` | `aud` does not name this verifier's audience |
/// | 9 | ``wrongIssuer(_:)`` | `iss` is not a trusted issuer |
/// | 10 | ``replayed(tokenID:)`` | this `jti` was accepted before and is still valid |
/// | 11 | ``replayCacheFull`` | the replay cache holds its capacity of unexpired token IDs: refused rather than risk a replay |
/// | 12 | ``invalidAccount(_:)`` | `sub` is not a valid account name |
/// | 13 | ``lifetimeTooLong(seconds:maximum:)`` | `exp - iat` is longer than the verifier's maximum lifetime |
/// | 14 | ``invalidTenant(_:)`` | `tid` is not a valid tenant ID or domain (empty, white space around it, control or format characters, too long) |
/// | 15 | ``invalidKey(_:)`` | a signing or verification key that is not 32 bytes; a verification key that is not a canonical point encoding or is of small order |
/// | 16 | ``cryptoBackendFailure(_:)`` | the platform crypto (libcrypto, CryptoKit) failed for a reason unrelated to the input |
/// | 17 | ``unsignable(_:)`` | the signer cannot write the assertion (a time that 64-bit whole seconds cannot hold) |
/// | 18 | ``invalidKeySet(_:)`` | a JWKS document refused as a whole, with the ``AssertionKeySet/Refusal`` |
///
/// Signing (``IdentityAssertionSigner``, ``AssertionSigningKey``), verifying (``IdentityAssertionVerifier``,
/// ``AssertionVerificationKey``) and reading key sets (``AssertionKeySet``) all throw this one type.
public enum AssertionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Code 1: not three canonical base64url parts, not JSON objects, too long, or a claim missing or of the wrong type.
    case malformed(String)
    /// Code 2: `alg` is not `EdDSA`.
    case unsupportedAlgorithm(String)
    /// Code 3: a header member other than `alg`, `kid` and `typ`, or `typ` not `JWT`.
    case unsupportedHeader(String)
    /// Code 4: no verification key has this `kid`.
    case unknownKey(String)
    /// Code 5: the signature does not verify.
    case badSignature
    /// Code 6: `exp` is past, beyond the clock skew.
    case expired(at: Date)
    /// Code 7: `nbf` or `iat` is in the future, beyond the clock skew.
    case notYetValid(until: Date)
    /// Code 8: `aud` does not name this verifier's audience.
    case wrongAudience(String)
    /// Code 9: `iss` is not a trusted issuer.
    case wrongIssuer(String)
    /// Code 10: a single-use verifier accepted this `jti` before, and it is still valid.
    case replayed(tokenID: String)
    /// Code 11: the replay cache is full of unexpired token IDs; refused rather than risk a replay.
    case replayCacheFull
    /// Code 12: `sub` is not a valid account name.
    case invalidAccount(String)
    /// Code 13: `exp - iat` is longer than the verifier's maximum lifetime.
    case lifetimeTooLong(seconds: TimeInterval, maximum: TimeInterval)
    /// Code 14: `tid` is not a valid tenant ID or domain.
    case invalidTenant(String)
    /// Code 15: a key that is not 32 bytes, or a verification key that is not a canonical point or is of small order.
    case invalidKey(String)
    /// Code 16: the platform crypto failed for a reason unrelated to the input.
    case cryptoBackendFailure(String)
    /// Code 17: the signer cannot write the assertion (a time that 64-bit whole seconds cannot hold).
    case unsignable(String)
    /// Code 18: a JWKS document refused as a whole.
    case invalidKeySet(AssertionKeySet.Refusal)

    /// The stable numeric code of this error (the table above); it never changes for a case.
    public var code: Int {
        switch self {
        case .malformed: 1
        case .unsupportedAlgorithm: 2
        case .unsupportedHeader: 3
        case .unknownKey: 4
        case .badSignature: 5
        case .expired: 6
        case .notYetValid: 7
        case .wrongAudience: 8
        case .wrongIssuer: 9
        case .replayed: 10
        case .replayCacheFull: 11
        case .invalidAccount: 12
        case .lifetimeTooLong: 13
        case .invalidTenant: 14
        case .invalidKey: 15
        case .cryptoBackendFailure: 16
        case .unsignable: 17
        case .invalidKeySet: 18
        }
    }

    public var description: String {
        let detail: String = switch self {
        case let .malformed(reason): "malformed token: \(reason)"
        case let .unsupportedAlgorithm(name): "algorithm \(String(reflecting: name)) is not EdDSA"
        case let .unsupportedHeader(name): "header member \(String(reflecting: name)) is not accepted"
        case let .unknownKey(id): "no key \(String(reflecting: id))"
        case .badSignature: "the signature does not verify"
        case let .expired(date): "expired at \(date)"
        case let .notYetValid(date): "not valid before \(date)"
        case let .wrongAudience(audience): "audience \(String(reflecting: audience)) is not this service"
        case let .wrongIssuer(issuer): "issuer \(String(reflecting: issuer)) is not trusted"
        case let .replayed(id): "token \(String(reflecting: id)) was used before"
        case .replayCacheFull: "the replay cache is full of unexpired tokens"
        case let .invalidAccount(reason): "invalid account: \(reason)"
        case let .lifetimeTooLong(seconds, maximum): "lifetime of \(seconds) s is longer than the maximum \(maximum) s"
        case let .invalidTenant(reason): "invalid tenant: \(reason)"
        case let .invalidKey(reason): "invalid key: \(reason)"
        case let .cryptoBackendFailure(reason): "the crypto library failed: \(reason)"
        case let .unsignable(reason): "cannot sign: \(reason)"
        case let .invalidKeySet(refusal): "key set refused: \(refusal)"
        }
        return "AssertionError \(code): \(detail)"
    }
}
