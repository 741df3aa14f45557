import Foundation
import IdentityRuntime

/// Verifies compact JWS identity assertions (``IdentityAssertion``) from trusted issuers for one audience,
/// with a set of Ed25519 keys by key ID, and accepts each token once.
///
/// Checks, in order; the first that fails throws its ``AssertionError``:
/// 1. At most 8 KiB; three parts of canonical base64url without padding; header and claims JSON objects.
/// 2. Header: `alg` exactly `EdDSA` (never `none`, never an HMAC or RSA algorithm, whatever key it names);
///    `kid` names a key of the set; `typ`, if present, is `JWT`; no other member (no `jwk`, `jku`, `x5u`,
///    `x5c`, `crit`: a token never chooses its own key).
/// 3. The Ed25519 signature over `header.claims` verifies under that key.
/// 4. Claims: `iss` is trusted, `aud` (a string or an array) names ``audience``, `exp` has not passed and
///    `nbf` / `iat` are not in the future (both within ``clockSkew``), `sub` is a valid account name, `jti`
///    is present and was not accepted before while still valid.
///
/// Rotation: add the new key beside the old ones (``addKey(_:id:)``); tokens signed with an old key verify
/// until it is removed (``removeKey(id:)``).
///
/// Replays: accepted token IDs are remembered until their `exp` (plus the skew), at most
/// ``replayCacheCapacity`` of them; when that many unexpired IDs are held, new tokens are refused
/// (``AssertionError/replayCacheFull``) rather than risk accepting a replay.
///
/// Thread-safe.
public final class IdentityAssertionVerifier: Sendable {
    public let issuers: Set<String>
    public let audience: String
    public let clockSkew: TimeInterval
    public let replayCacheCapacity: Int
    private let clock: @Sendable () -> Date
    private let keySet: LockedValue<[String: AssertionVerificationKey]>
    private let seen = LockedValue<[String: Date]>([:])

    /// The largest token accepted, in bytes.
    public static let maximumTokenLength = 8_192

    /// - Parameters:
    ///   - keys: verification keys by key ID.
    ///   - issuers: the trusted `iss` values.
    ///   - audience: this service's name, which `aud` must contain.
    ///   - clockSkew: seconds of tolerance for `exp`, `nbf` and `iat` (default 60).
    ///   - replayCacheCapacity: the most unexpired token IDs remembered (default 100,000).
    ///   - clock: the current time (tests pass their own).
    public init(
        keys: [String: AssertionVerificationKey], issuers: Set<String>, audience: String,
        clockSkew: TimeInterval = 60, replayCacheCapacity: Int = 100_000,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        keySet = LockedValue(keys)
        self.issuers = issuers
        self.audience = audience
        self.clockSkew = clockSkew
        self.replayCacheCapacity = max(1, replayCacheCapacity)
        self.clock = clock
    }

    /// The key IDs in use.
    public var keyIDs: [String] {
        keySet.withLock { $0.keys.sorted() }
    }

    /// Adds (or replaces) the key `id`.
    public func addKey(_ key: AssertionVerificationKey, id: String) {
        keySet.withLock { $0[id] = key }
    }

    /// Removes the key `id`: tokens signed with it no longer verify.
    public func removeKey(id: String) {
        _ = keySet.withLock { $0.removeValue(forKey: id) }
    }

    /// The assertion `token` carries, once every check passed; the token ID is then used up.
    public func verify(_ token: String) throws(AssertionError) -> IdentityAssertion {
        let assertion = try check(token)
        try remember(assertion)
        return assertion
    }

    private struct Header: Decodable {
        let alg: String
        let kid: String?
        let typ: String?
    }

    private enum Audience: Decodable {
        case one(String)
        case many([String])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let one = try? container.decode(String.self) { self = .one(one) } else { self = .many(try container.decode([String].self)) }
        }

        var names: [String] {
            switch self {
            case let .one(name): [name]
            case let .many(names): names
            }
        }
    }

    private struct Claims: Decodable {
        let sub: String
        let iss: String
        let aud: Audience
        let iat: Int64
        let exp: Int64
        let nbf: Int64?
        let jti: String
        let tid: String?
    }

    /// Every check but the replay cache.
    private func check(_ token: String) throws(AssertionError) -> IdentityAssertion {
        guard token.utf8.count <= Self.maximumTokenLength else { throw .malformed("longer than \(Self.maximumTokenLength) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("\(parts.count) parts, not 3") }
        guard let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]) else { throw .malformed("not canonical base64url") }
        let headerObject = try Self.object(headerBytes, "header")
        for key in headerObject.keys where !["alg", "kid", "typ"].contains(key) { throw .unsupportedHeader(key) }
        let header: Header
        do { header = try JSONDecoder().decode(Header.self, from: Data(headerBytes)) } catch {
            throw .malformed("header: \(error)")
        }
        guard header.alg == "EdDSA" else { throw .unsupportedAlgorithm(header.alg) }
        if let typ = header.typ, typ != "JWT" { throw .unsupportedHeader("typ \(typ)") }
        guard let keyID = header.kid else { throw .malformed("no kid") }
        guard let key = keySet.withLock({ $0[keyID] }) else { throw .unknownKey(keyID) }
        let signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        let valid: Bool
        do { valid = try key.isValidSignature(signature, of: signingInput) } catch {
            throw .malformed("the signature could not be checked: \(error)")
        }
        guard valid else { throw .badSignature }
        _ = try Self.object(claimBytes, "claims")
        let claims: Claims
        do { claims = try JSONDecoder().decode(Claims.self, from: Data(claimBytes)) } catch {
            throw .malformed("claims: \(error)")
        }
        guard issuers.contains(claims.iss) else { throw .wrongIssuer(claims.iss) }
        guard claims.aud.names.contains(audience) else { throw .wrongAudience(claims.aud.names.joined(separator: ",")) }
        let now = clock().timeIntervalSince1970
        guard Double(claims.exp) + clockSkew > now else { throw .expired(at: Date(timeIntervalSince1970: Double(claims.exp))) }
        if let nbf = claims.nbf, Double(nbf) - clockSkew > now { throw .notYetValid(until: Date(timeIntervalSince1970: Double(nbf))) }
        guard Double(claims.iat) - clockSkew <= now else { throw .notYetValid(until: Date(timeIntervalSince1970: Double(claims.iat))) }
        guard !claims.jti.isEmpty, claims.jti.utf8.count <= 256 else { throw .malformed("jti empty or longer than 256 bytes") }
        let account: Identity
        do { account = try Identity(validating: claims.sub) } catch { throw .invalidAccount("\(error)") }
        guard !account.isUnmanaged else { throw .invalidAccount("sub is empty") }
        return IdentityAssertion(
            account: account, tenant: claims.tid, issuer: claims.iss, audience: audience,
            issuedAt: Date(timeIntervalSince1970: Double(claims.iat)),
            notBefore: claims.nbf.map { Date(timeIntervalSince1970: Double($0)) },
            expiresAt: Date(timeIntervalSince1970: Double(claims.exp)), tokenID: claims.jti)
    }

    private static func object(_ bytes: [UInt8], _ part: String) throws(AssertionError) -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            throw .malformed("the \(part) is not a JSON object")
        }
        return object
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
