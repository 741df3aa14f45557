import Foundation
import IdentityRuntime

/// Verifies compact JWS identity assertions (``IdentityAssertion``) from trusted issuers for one audience,
/// with a set of Ed25519 keys by key ID, and accepts each token once.
///
/// Checks, in order; the first that fails throws its ``AssertionError``:
/// 1. At most 8 KiB; three parts of canonical base64url without padding; header and claims JSON objects in
///    UTF-8, read strictly in one pass: a member name given twice is refused (a token must not mean one thing
///    to this verifier and another to a parser that keeps the other duplicate), and so are invalid UTF-8, lone
///    surrogates, and `iat` / `exp` / `nbf` that are not integers.
/// 2. Header: `alg` exactly `EdDSA` (never `none`, never an HMAC or RSA algorithm, whatever key it names);
///    `kid` names a key of the set; `typ`, if present, is `JWT`; no other member (no `jwk`, `jku`, `x5u`,
///    `x5c`, `crit`: a token never chooses its own key).
/// 3. The Ed25519 signature over `header.claims` verifies under that key.
/// 4. Claims: `iss` is trusted, `aud` (a string or an array) names ``audience``, `exp` has not passed and
///    `nbf` / `iat` are not in the future (both within ``clockSkew``), the lifetime `exp - iat` is at most
///    ``maximumLifetime``, `sub` is a valid account name, `tid` (when present) a valid tenant, `jti` is present
///    and was not accepted before while still valid.
///
/// Strings compare byte for byte (RFC 7519 §7.3): `alg`, `typ`, `kid`, `iss` and `aud` match only when their
/// UTF-8 is identical to the configured value, never by Unicode canonical equivalence (a decomposed `é`, or
/// the Kelvin sign for `K`, is another name) and never by case. A JSON `null` is a member of the wrong type,
/// never an absent one: `"typ": null`, `"nbf": null` or `"tid": null` are refused as malformed.
///
/// Rotation: add the new key beside the old ones (``addKey(_:id:)``); tokens signed with an old key verify
/// until it is removed (``removeKey(id:)``).
///
/// Replays: accepted token IDs are remembered until their `exp` (plus the skew), at most
/// ``replayCacheCapacity`` of them; when that many unexpired IDs are held, new tokens are refused
/// (``AssertionError/replayCacheFull``) rather than risk accepting a replay. Since a token lives at most
/// ``maximumLifetime`` and is issued at most ``clockSkew`` ahead, no entry is kept longer than
/// `maximumLifetime + 2 * clockSkew`.
///
/// Thread-safe.
public final class IdentityAssertionVerifier: Sendable {
    public let issuers: Set<String>
    public let audience: String
    public let clockSkew: TimeInterval
    public let replayCacheCapacity: Int
    /// The longest lifetime (`exp - iat`, seconds) a token may have: one that claims more is refused
    /// (``AssertionError/lifetimeTooLong(seconds:maximum:)``).
    public let maximumLifetime: TimeInterval
    private let clock: @Sendable () -> Date
    /// The issuers' and the audience's UTF-8, compared byte for byte.
    private let issuerBytes: Set<[UInt8]>
    private let audienceBytes: [UInt8]
    /// Keys by the UTF-8 of their ID: `kid` is matched byte for byte.
    private let keySet: LockedValue<[[UInt8]: AssertionVerificationKey]>
    private let seen = LockedValue<[String: Date]>([:])

    /// The largest token accepted, in bytes.
    public static let maximumTokenLength = 8_192

    /// - Parameters:
    ///   - keys: verification keys by key ID.
    ///   - issuers: the trusted `iss` values.
    ///   - audience: this service's name, which `aud` must contain.
    ///   - clockSkew: seconds of tolerance for `exp`, `nbf` and `iat` (default 60).
    ///   - replayCacheCapacity: the most unexpired token IDs remembered (default 100,000).
    ///   - maximumLifetime: the longest `exp - iat` accepted, in seconds (default 3,600: one hour).
    ///   - clock: the current time (tests pass their own).
    ///
    /// Key IDs, issuers and the audience are matched byte for byte: give them in the spelling the tokens use.
    public init(
        keys: [String: AssertionVerificationKey], issuers: Set<String>, audience: String,
        clockSkew: TimeInterval = 60, replayCacheCapacity: Int = 100_000, maximumLifetime: TimeInterval = 3_600,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        keySet = LockedValue(Dictionary(keys.map { (Array($0.key.utf8), $0.value) }, uniquingKeysWith: { first, _ in first }))
        self.issuers = issuers
        self.audience = audience
        issuerBytes = Set(issuers.map { Array($0.utf8) })
        audienceBytes = Array(audience.utf8)
        self.clockSkew = clockSkew
        self.replayCacheCapacity = max(1, replayCacheCapacity)
        self.maximumLifetime = max(0, maximumLifetime)
        self.clock = clock
    }

    /// The key IDs in use.
    public var keyIDs: [String] {
        keySet.withLock { $0.keys.map { String(decoding: $0, as: UTF8.self) }.sorted() }
    }

    /// Adds (or replaces) the key `id` (matched byte for byte against a token's `kid`).
    public func addKey(_ key: AssertionVerificationKey, id: String) {
        keySet.withLock { $0[Array(id.utf8)] = key }
    }

    /// Removes the key `id` (the same bytes it was added with): tokens signed with it no longer verify.
    public func removeKey(id: String) {
        _ = keySet.withLock { $0.removeValue(forKey: Array(id.utf8)) }
    }

    /// The assertion `token` carries, once every check passed; the token ID is then used up.
    public func verify(_ token: String) throws(AssertionError) -> IdentityAssertion {
        let assertion = try check(token)
        try remember(assertion)
        return assertion
    }

    /// Every check but the replay cache.
    private func check(_ token: String) throws(AssertionError) -> IdentityAssertion {
        guard token.utf8.count <= Self.maximumTokenLength else { throw .malformed("longer than \(Self.maximumTokenLength) bytes") }
        let bytes = Array(token.utf8)
        var dots: [Int] = []
        for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: ".") {
            dots.append(index)
            if dots.count > 2 { break }
        }
        guard dots.count == 2 else {
            throw .malformed("\(dots.count > 2 ? "more than 3" : "\(dots.count + 1)") parts, not 3")
        }
        guard let headerBytes = Base64URL.decode(bytes[..<dots[0]]),
              let claimBytes = Base64URL.decode(bytes[(dots[0] + 1)..<dots[1]]),
              let signature = Base64URL.decode(bytes[(dots[1] + 1)...]) else { throw .malformed("not canonical base64url") }

        // The header: alg, kid, typ and nothing else (a token never chooses its own key).
        let header = try Self.object(headerBytes, "header")
        if header.count > 3 || header.keys.contains(where: { !["alg", "kid", "typ"].contains($0) }) {
            let unknown = header.keys.filter { !["alg", "kid", "typ"].contains($0) }.sorted()
            throw .unsupportedHeader(unknown[0])
        }
        guard case let .string(algorithm) = header["alg"] else { throw .malformed("header: alg missing or not a string") }
        guard algorithm.utf8.elementsEqual("EdDSA".utf8) else { throw .unsupportedAlgorithm(algorithm) }
        if let typ = try Self.optionalString(header, "typ", in: "header"), !typ.utf8.elementsEqual("JWT".utf8) {
            throw .unsupportedHeader("typ \(typ)")
        }
        let keyID: String
        switch header["kid"] {
        case let .string(kid): keyID = kid
        case nil: throw .malformed("no kid")
        default: throw .malformed("header: kid is not a string")
        }
        guard let key = keySet.withLock({ $0[Array(keyID.utf8)] }) else { throw .unknownKey(keyID) }
        let valid: Bool
        do { valid = try key.isValidSignature(signature, of: Array(bytes[..<dots[1]])) } catch {
            throw .malformed("the signature could not be checked: \(error)")
        }
        guard valid else { throw .badSignature }

        // The claims, with their types; members not read here are checked for syntax only.
        let claims = try Self.object(claimBytes, "claims")
        let subject = try Self.string(claims, "sub"), issuer = try Self.string(claims, "iss")
        let tokenID = try Self.string(claims, "jti")
        let tenant = try Self.optionalString(claims, "tid", in: "claims")
        let audiences: [String]
        switch claims["aud"] {
        case let .string(one): audiences = [one]
        case let .strings(many): audiences = many
        default: throw .malformed("claims: aud missing, or neither a string nor an array of strings")
        }
        let issuedAt = try Self.integer(claims, "iat"), expiresAt = try Self.integer(claims, "exp")
        let notBefore: Int64?
        switch claims["nbf"] {
        case nil: notBefore = nil
        case let .integer(value): notBefore = value
        default: throw .malformed("claims: nbf is not an integer")
        }

        guard issuerBytes.contains(Array(issuer.utf8)) else { throw .wrongIssuer(issuer) }
        guard audiences.contains(where: { $0.utf8.elementsEqual(audienceBytes) }) else {
            throw .wrongAudience(audiences.joined(separator: ","))
        }
        let now = clock().timeIntervalSince1970
        guard Double(expiresAt) + clockSkew > now else { throw .expired(at: Date(timeIntervalSince1970: Double(expiresAt))) }
        if let notBefore, Double(notBefore) - clockSkew > now { throw .notYetValid(until: Date(timeIntervalSince1970: Double(notBefore))) }
        guard Double(issuedAt) - clockSkew <= now else { throw .notYetValid(until: Date(timeIntervalSince1970: Double(issuedAt))) }
        guard expiresAt >= issuedAt else { throw .malformed("claims: exp is before iat") }
        // In Double: the difference of two Int64 can overflow.
        let lifetime = Double(expiresAt) - Double(issuedAt)
        guard lifetime <= maximumLifetime else {
            throw .lifetimeTooLong(seconds: lifetime, maximum: maximumLifetime)
        }
        guard !tokenID.isEmpty, tokenID.utf8.count <= 256 else { throw .malformed("jti empty or longer than 256 bytes") }
        let account: Identity
        do { account = try Identity(validating: subject) } catch { throw .invalidAccount("\(error)") }
        guard !account.isUnmanaged else { throw .invalidAccount("sub is empty") }
        if let tenant {
            // A tenant ID or domain follows the rules of an account name: no surrounding white space, no control
            // or format characters, at most 1,024 bytes, not empty.
            let valid: Identity
            do { valid = try Identity(validating: tenant) } catch { throw .invalidTenant("\(error)") }
            guard !valid.isUnmanaged else { throw .invalidTenant("tid is empty") }
        }
        return IdentityAssertion(
            account: account, tenant: tenant, issuer: issuer, audience: audience,
            issuedAt: Date(timeIntervalSince1970: Double(issuedAt)),
            notBefore: notBefore.map { Date(timeIntervalSince1970: Double($0)) },
            expiresAt: Date(timeIntervalSince1970: Double(expiresAt)), tokenID: tokenID)
    }

    private static func object(_ bytes: [UInt8], _ part: String) throws(AssertionError) -> [String: AssertionJSON.Value] {
        switch AssertionJSON.object(bytes) {
        case let .success(members): return members
        case let .failure(failure): throw .malformed("the \(part) is not a valid JSON object: \(failure)")
        }
    }

    private static func string(_ claims: [String: AssertionJSON.Value], _ name: String) throws(AssertionError) -> String {
        guard case let .string(value) = claims[name] else { throw .malformed("claims: \(name) missing or not a string") }
        return value
    }

    /// An optional string member: absent is `nil`; anything but a string, `null` included, is malformed.
    private static func optionalString(_ members: [String: AssertionJSON.Value], _ name: String, in part: String) throws(AssertionError) -> String? {
        switch members[name] {
        case nil: return nil
        case let .string(value): return value
        default: throw .malformed("\(part): \(name) is not a string")
        }
    }

    private static func integer(_ claims: [String: AssertionJSON.Value], _ name: String) throws(AssertionError) -> Int64 {
        guard case let .integer(value) = claims[name] else { throw .malformed("claims: \(name) missing or not an integer") }
        return value
    }

    /// Uses up the token ID of `assertion`, or refuses a replay.
    private func remember(_ assertion: IdentityAssertion) throws(AssertionError) {
        let now = clock()
        let until = assertion.expiresAt.addingTimeInterval(clockSkew)
        try seen.withLock { (seen: inout [String: Date]) throws(AssertionError) in
            if let previous = seen[assertion.tokenID], previous > now { throw .replayed(tokenID: assertion.tokenID) }
            if seen.count >= replayCacheCapacity {
                seen = seen.filter { $0.value > now }
                guard seen.count < replayCacheCapacity else { throw .replayCacheFull }
            }
            seen[assertion.tokenID] = until
        }
    }
}
