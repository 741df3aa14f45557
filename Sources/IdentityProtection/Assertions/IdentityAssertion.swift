import Foundation
import IdentityRuntime

/// Who a request between services is for: a signed statement of an account (and its tenant) from an issuer to
/// an audience, valid for a short time, used once. Carried as a standard compact JWS / JWT signed with
/// Ed25519 (`"alg": "EdDSA"`), so that services in any language can verify it.
///
/// Claims (RFC 7519): `sub` the account's name, `tid` its tenant (when known), `iss`, `aud`, `iat`, `nbf`
/// (when set), `exp` (seconds since 1970, whole numbers), `jti` a unique token ID. The protected header is
/// `{"alg":"EdDSA","kid":…,"typ":"JWT"}`. See docs/service-boundary.md for the format and the checks.
public struct IdentityAssertion: Sendable, Hashable {
    /// The account the request is for.
    public var account: Identity
    /// Its tenant (a tenant ID or domain), when known.
    public var tenant: String?
    /// Who signed it (the calling service).
    public var issuer: String
    /// Who it is for (the called service).
    public var audience: String
    /// When it was issued (whole seconds).
    public var issuedAt: Date
    /// Not valid before this moment, if set (whole seconds).
    public var notBefore: Date?
    /// Not valid from this moment on (whole seconds).
    public var expiresAt: Date
    /// A unique ID: a verifier accepts each token ID once.
    public var tokenID: String

    public init(
        account: Identity, tenant: String? = nil, issuer: String, audience: String,
        issuedAt: Date, notBefore: Date? = nil, expiresAt: Date, tokenID: String = UUID().uuidString
    ) {
        self.account = account
        self.tenant = tenant
        self.issuer = issuer
        self.audience = audience
        self.issuedAt = Self.wholeSeconds(issuedAt)
        self.notBefore = notBefore.map(Self.wholeSeconds)
        self.expiresAt = Self.wholeSeconds(expiresAt)
        self.tokenID = tokenID
    }

    static func wholeSeconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }

    /// The claims as a compact JSON object with sorted keys.
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` when a time is not a whole number of seconds
    ///   that JSON integers of 64 bits can hold (a date millions of years away).
    func claimsJSON() throws(ProtectionError) -> [UInt8] {
        func seconds(_ date: Date, _ claim: String) throws(ProtectionError) -> AssertionJSON.Written {
            guard let value = Int64(exactly: date.timeIntervalSince1970.rounded(.down)) else {
                throw .invalidEnvelope(reason: "the assertion's \(claim) cannot be written as whole seconds")
            }
            return .integer(value)
        }
        var members: [(name: String, value: AssertionJSON.Written)] = [
            ("aud", .string(audience)), ("exp", try seconds(expiresAt, "exp")), ("iat", try seconds(issuedAt, "iat")),
            ("iss", .string(issuer)), ("jti", .string(tokenID)),
        ]
        if let notBefore { members.append(("nbf", try seconds(notBefore, "nbf"))) }
        members.append(("sub", .string(account.name)))
        if let tenant { members.append(("tid", .string(tenant))) }
        return AssertionJSON.objectBytes(members)
    }
}

/// Why an identity assertion was refused. Every case has a stable ``code``.
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
public enum AssertionError: Error, Sendable, Hashable, CustomStringConvertible {
    case malformed(String)
    case unsupportedAlgorithm(String)
    case unsupportedHeader(String)
    case unknownKey(String)
    case badSignature
    case expired(at: Date)
    case notYetValid(until: Date)
    case wrongAudience(String)
    case wrongIssuer(String)
    case replayed(tokenID: String)
    case replayCacheFull
    case invalidAccount(String)
    case lifetimeTooLong(seconds: TimeInterval, maximum: TimeInterval)
    case invalidTenant(String)

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
        }
        return "AssertionError \(code): \(detail)"
    }
}
