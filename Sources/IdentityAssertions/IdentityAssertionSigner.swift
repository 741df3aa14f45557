import Foundation
import IdentityJSON
import IdentityRuntime

/// Signs ``IdentityAssertion``s as compact JWS (`header.claims.signature`, base64url) with one Ed25519 key,
/// named by its key ID (`kid`) so that verifiers can hold several keys during a rotation.
///
/// ```swift
/// let signer = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "2026-11", issuer: "frontend")
/// let token = try signer.sign(account: "alice@contoso.com", tenant: "contoso.com", audience: "documents")
/// request.headers["Authorization"] = "Bearer " + token
/// ```
public struct IdentityAssertionSigner: Sendable {
    /// The private key every token is signed with.
    public let key: AssertionSigningKey
    /// The `kid` written into every token's header: the verifier's key set must hold the public key under it.
    public let keyID: String
    /// The `iss` claim of every token.
    public let issuer: String
    /// The base64url JOSE header (`alg`, `kid`, `typ`), the same for every token: encoded once.
    private let encodedHeader: String

    /// A signer that signs with `key`, names it `keyID` and issues as `issuer`.
    public init(key: AssertionSigningKey, keyID: String, issuer: String) {
        self.key = key
        self.keyID = keyID
        self.issuer = issuer
        encodedHeader = Base64URL.encode(
            StrictJSON.objectBytes([("alg", .string("EdDSA")), ("kid", .string(keyID)), ("typ", .string("JWT"))]))
    }

    /// The compact JWS of `assertion` (its issuer is replaced by this signer's).
    public func sign(_ assertion: IdentityAssertion) throws(AssertionError) -> String {
        var assertion = assertion
        assertion.issuer = issuer
        let signingInput = encodedHeader + "." + Base64URL.encode(try assertion.claimsJSON())
        let signature = try key.signature(of: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Signs a new assertion for `account`, issued now, valid for `lifetime` seconds (default 5 minutes), with a
    /// fresh token ID.
    public func sign(
        account: Identity, tenant: String? = nil, audience: String, lifetime: TimeInterval = 300, now: Date = Date()
    ) throws(AssertionError) -> String {
        try sign(IdentityAssertion(
            account: account, tenant: tenant, issuer: issuer, audience: audience, issuedAt: now,
            expiresAt: now.addingTimeInterval(lifetime)))
    }
}
