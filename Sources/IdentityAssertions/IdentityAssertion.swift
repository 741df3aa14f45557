import Foundation
import IdentityJSON
import IdentityRuntime

/// Who a request between services is for: a signed statement of an account (and its tenant) from an issuer to
/// an audience, valid for a short time. Carried as a standard compact JWS / JWT signed with
/// Ed25519 (`"alg": "EdDSA"`), so that services in any language can verify it.
///
/// Claims (RFC 7519): `sub` the account's name, `tid` its tenant (when known), `iss`, `aud`, `iat`, `nbf`
/// (when set), `exp` (seconds since 1970, whole numbers), `jti` a unique token ID. The protected header is
/// `{"alg":"EdDSA","kid":…,"typ":"JWT"}`. See Sources/IdentityPolicy/IdentityPolicy.docc/ServiceBoundary.md for the format and the checks.
///
/// A ``IdentityAssertionVerifier`` in ``IdentityAssertionVerifier/Mode/singleUse`` mode accepts each token ID
/// once; in ``IdentityAssertionVerifier/Mode/reusable`` mode a token is a bearer token, accepted until it
/// expires or its key is removed.
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
    /// A unique ID: a single-use verifier accepts each token ID once.
    public var tokenID: String

    /// An assertion with these claims; `tokenID` defaults to a fresh UUID.
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
    /// - Throws: ``AssertionError/unsignable(_:)`` when a time is not a whole number of seconds that JSON
    ///   integers of 64 bits can hold (a date millions of years away).
    func claimsJSON() throws(AssertionError) -> [UInt8] {
        func seconds(_ date: Date, _ claim: String) throws(AssertionError) -> StrictJSON.Written {
            guard let value = Int64(exactly: date.timeIntervalSince1970.rounded(.down)) else {
                throw .unsignable("the assertion's \(claim) cannot be written as whole seconds")
            }
            return .integer(value)
        }
        var members: [(name: String, value: StrictJSON.Written)] = [
            ("aud", .string(audience)), ("exp", try seconds(expiresAt, "exp")), ("iat", try seconds(issuedAt, "iat")),
            ("iss", .string(issuer)), ("jti", .string(tokenID)),
        ]
        if let notBefore { members.append(("nbf", try seconds(notBefore, "nbf"))) }
        members.append(("sub", .string(account.name)))
        if let tenant { members.append(("tid", .string(tenant))) }
        return StrictJSON.objectBytes(members)
    }
}
