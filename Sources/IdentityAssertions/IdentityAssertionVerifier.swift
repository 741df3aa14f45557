import Foundation
import IdentityCrypto
import IdentityJSON
import IdentityRuntime

/// Verifies compact JWS identity assertions (``IdentityAssertion``) from trusted issuers for one audience,
/// with a set of Ed25519 keys by key ID (an ``AssertionKeySet``), in one of two modes (``Mode``):
///
/// - ``Mode/singleUse`` (the default): each token ID (`jti`) is accepted once. For one-shot assertions
///   between services: a caller signs a new token for every request.
/// - ``Mode/reusable``: a token is a bearer token. It is verified in full the first time, then recognized by its
///   exact bytes until it expires or its key is removed; no replay check. For clients
///   that keep their token for its lifetime.
///
/// Checks, in order; the first that fails throws its ``AssertionError``:
/// 1. At most 8 KiB; three parts of canonical base64url without padding; header and claims JSON objects in
///    UTF-8, read strictly in one pass: a member name given twice is refused (a token must not mean one thing
///    to this verifier and another to a parser that keeps the other duplicate), and so are invalid UTF-8, lone
///    surrogates, and `iat` / `exp` / `nbf` that are not integers.
/// 2. Header: `alg` exactly `EdDSA` (never `none`, never an HMAC or RSA algorithm, whatever key it names);
///    `kid` names a key of the set; `typ`, if present, is `JWT`; no other member (no `jwk`, `jku`, `x5u`,
///    `x5c`, `crit`: a token never chooses its own key).
/// 3. The Ed25519 signature over `header.claims` verifies under that key (``AssertionVerificationKey/isValidSignature(_:of:)``:
///    first the strict rule, in this code — `S` below the group order L, `R` and the key canonical (y < p),
///    neither of small order — then RFC 8032's cofactorless equation, by libsodium on Linux (libcrypto when
///    `sodium_init()` fails: the same answers) or CryptoKit).
/// 4. Claims: `iss` is trusted, `aud` (a string or an array) names ``audience``, `exp` has not passed and
///    `nbf` / `iat` are not in the future (both within ``clockSkew``), the lifetime `exp - iat` is at most
///    ``maximumLifetime``, `sub` is a valid account name, `tid` (when present) a valid tenant, `jti` is present
///    (1 to 256 bytes).
/// 5. Single-use mode: `jti` was not accepted before while still valid. Reusable mode: none.
///
/// Strings compare byte for byte (RFC 7519 §7.3): `alg`, `typ`, `kid`, `iss` and `aud` match only when their
/// UTF-8 is identical to the configured value, never by Unicode canonical equivalence (a decomposed `é`, or
/// the Kelvin sign for `K`, is another name) and never by case. A JSON `null` is a member of the wrong type,
/// never an absent one: `"typ": null`, `"nbf": null` or `"tid": null` are refused as malformed.
///
/// Rotation: add the new key beside the old ones (``addKey(_:id:)``); tokens signed with an old key verify
/// until it is removed (``removeKey(id:)``), or until ``replaceKeys(with:)`` installs a set without it.
///
/// Replays (single-use mode): accepted token IDs are remembered until their `exp` (plus the skew), at most
/// ``replayCacheCapacity`` of them; when that many unexpired IDs are held, new tokens are refused
/// (``AssertionError/replayCacheFull``) rather than risk accepting a replay. Since a token lives at most
/// ``maximumLifetime`` and is issued at most ``clockSkew`` ahead, no entry is kept longer than
/// `maximumLifetime + 2 * clockSkew`.
///
/// Reusable tokens (reusable mode): a token that passed every check is kept in a cache of at most
/// ``tokenCacheCapacity`` entries, by a 64-bit hash of its exact bytes (Swift's `Hasher`: SipHash with the
/// process's random seed, so nobody outside can pick tokens that collide), with the bytes themselves: a later
/// ``verify(_:)`` of the same bytes is answered from the cache only when the whole token is identical (a token
/// whose hash is another's is verified in full, and takes that entry's place). Each use
/// checks the clock again: `exp` (plus the skew) must not have passed, and `nbf` / `iat` (minus the skew) must
/// not be in the future, as in a full verification; the issuer and audience rules cannot change (they are
/// constants of the verifier). A cached token lives until its `exp` plus the skew, and no longer than its key:
/// ``removeKey(id:)``, replacing the key of its `kid` with ``addKey(_:id:)``, or a ``replaceKeys(with:)`` that
/// drops or changes the key removes every token verified with it, in the same critical section as the key
/// itself, so no token of the key is accepted once that call has returned. A full cache first drops the
/// expired entries, then arbitrary ones (down to 7/8 of the capacity): a token that left the cache is verified
/// in full at its next use. Eviction never accepts anything a full verification would refuse.
///
/// ```swift
/// // One-shot assertions between services (the default):
/// let verifier = IdentityAssertionVerifier(keys: ["gateway-1": gatewayKey], issuers: ["gateway"], audience: "documents")
/// // Bearer tokens that clients keep for their lifetime:
/// let bearer = IdentityAssertionVerifier(
///     keySet: try AssertionKeySet(jwks: published), issuers: ["gateway"], audience: "documents", mode: .reusable)
/// ```
///
/// > Warning: In reusable mode a stolen token can be replayed until it expires: keep lifetimes short (the
/// > ``maximumLifetime`` bound holds in both modes) and send tokens only over TLS.
///
/// Thread-safe: ``verify(_:)``, ``addKey(_:id:)``, ``removeKey(id:)`` and ``replaceKeys(with:)`` may be called
/// from any number of threads at once. A ``verify(_:)`` that returns an assertion found its key present at a
/// moment between its call and its return.
public final class IdentityAssertionVerifier: Sendable {
    /// How a verifier treats a token it has accepted before.
    public enum Mode: Sendable, Hashable {
        /// Each token ID (`jti`) is accepted once, until its `exp` plus the skew; a second use is
        /// ``AssertionError/replayed(tokenID:)``. Today's default, for one-shot service-to-service assertions.
        case singleUse
        /// A token is a bearer token, accepted as often as it is presented while it is valid: verified in full
        /// once, then recognized by its exact bytes until it expires or its key is removed. No replay check.
        case reusable
    }

    /// How this verifier treats a token it has accepted before.
    public let mode: Mode
    /// The trusted issuers: a token whose `iss` is not one of them is refused.
    public let issuers: Set<String>
    /// This verifier's audience: a token whose `aud` does not name it is refused.
    public let audience: String
    /// How far, in seconds, `exp`, `nbf` and `iat` may be off before a token is refused.
    public let clockSkew: TimeInterval
    /// Single-use mode: the most unexpired token IDs remembered.
    public let replayCacheCapacity: Int
    /// Reusable mode: the most verified tokens kept (each with its bytes, at most ``maximumTokenLength``; a
    /// typical token of 400 bytes takes about 1 KiB in the cache).
    public let tokenCacheCapacity: Int
    /// The longest lifetime (`exp - iat`, seconds) a token may have: one that claims more is refused
    /// (``AssertionError/lifetimeTooLong(seconds:maximum:)``).
    public let maximumLifetime: TimeInterval
    /// What sees every verification's outcome (``AssertionVerificationObserver``); `nil` for nothing.
    public let observer: (any AssertionVerificationObserver)?
    private let clock: @Sendable () -> Date
    /// The issuers' and the audience's UTF-8, compared byte for byte.
    private let issuerBytes: Set<[UInt8]>
    private let audienceBytes: [UInt8]
    /// The keys, the replay cache and the token cache, under one lock: a key's removal and the removal of the
    /// tokens verified with it are one step.
    private let state: LockedValue<State>

    /// The largest token accepted, in bytes.
    public static let maximumTokenLength = 8_192

    /// - Parameters:
    ///   - keys: verification keys by key ID.
    ///   - issuers: the trusted `iss` values.
    ///   - audience: this service's name, which `aud` must contain.
    ///   - mode: ``Mode/singleUse`` (the default) or ``Mode/reusable``.
    ///   - clockSkew: seconds of tolerance for `exp`, `nbf` and `iat` (default 60).
    ///   - replayCacheCapacity: single-use mode: the most unexpired token IDs remembered (default 100,000).
    ///   - tokenCacheCapacity: reusable mode: the most verified tokens kept (default 10,000).
    ///   - maximumLifetime: the longest `exp - iat` accepted, in seconds (default 3,600: one hour).
    ///   - observer: what sees the outcome of every verification (metrics, audit); `nil` (the default) for
    ///     nothing.
    ///   - clock: the current time (tests pass their own).
    ///
    /// Key IDs, issuers and the audience are matched byte for byte: give them in the spelling the tokens use.
    public convenience init(
        keys: [String: AssertionVerificationKey], issuers: Set<String>, audience: String, mode: Mode = .singleUse,
        clockSkew: TimeInterval = 60, replayCacheCapacity: Int = 100_000, tokenCacheCapacity: Int = 10_000,
        maximumLifetime: TimeInterval = 3_600, observer: (any AssertionVerificationObserver)? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            keySet: AssertionKeySet(keys), issuers: issuers, audience: audience, mode: mode, clockSkew: clockSkew,
            replayCacheCapacity: replayCacheCapacity, tokenCacheCapacity: tokenCacheCapacity,
            maximumLifetime: maximumLifetime, observer: observer, clock: clock)
    }

    /// A verifier of the keys of `keySet` (for example read from a JWKS document,
    /// `AssertionKeySet(jwks:)`); the other parameters as in
    /// ``init(keys:issuers:audience:mode:clockSkew:replayCacheCapacity:tokenCacheCapacity:maximumLifetime:observer:clock:)``.
    public init(
        keySet: AssertionKeySet, issuers: Set<String>, audience: String, mode: Mode = .singleUse,
        clockSkew: TimeInterval = 60, replayCacheCapacity: Int = 100_000, tokenCacheCapacity: Int = 10_000,
        maximumLifetime: TimeInterval = 3_600, observer: (any AssertionVerificationObserver)? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        var initial = State()
        for (id, key) in keySet.storage { initial.install(key, id: id) }
        state = LockedValue(initial)
        self.mode = mode
        self.issuers = issuers
        self.audience = audience
        issuerBytes = Set(issuers.map { Array($0.utf8) })
        audienceBytes = Array(audience.utf8)
        self.clockSkew = clockSkew
        self.replayCacheCapacity = max(1, replayCacheCapacity)
        self.tokenCacheCapacity = max(1, tokenCacheCapacity)
        self.maximumLifetime = max(0, maximumLifetime)
        self.observer = observer
        self.clock = clock
    }

    /// The key IDs in use.
    public var keyIDs: [String] {
        keySet.keyIDs
    }

    /// Reusable mode: how many tokens the cache holds now (tests).
    var cachedTokenCount: Int {
        state.withLock { $0.tokens.count }
    }

    /// The keys in use, as a key set (a snapshot: later changes to the verifier do not change it).
    public var keySet: AssertionKeySet {
        state.withLock { state in AssertionKeySet(storage: state.keys.mapValues(\.key)) }
    }

    /// Adds the key `id` (matched byte for byte against a token's `kid`). Replacing the key of an `id` in use
    /// is a removal of the old key (the tokens cached under it are dropped) and the addition of the new one.
    public func addKey(_ key: AssertionVerificationKey, id: String) {
        state.withLock { state in
            let bytes = Array(id.utf8)
            if let old = state.keys[bytes], old.key == key { return }
            state.dropTokens(ofKey: bytes)
            state.install(key, id: bytes)
        }
    }

    /// Removes the key `id` (the same bytes it was added with): tokens signed with it no longer verify, and the
    /// tokens cached in reusable mode that were verified with it are dropped in the same step. Once this call
    /// has returned, no ``verify(_:)`` accepts a token of this key.
    public func removeKey(id: String) {
        state.withLock { state in
            let bytes = Array(id.utf8)
            guard state.keys.removeValue(forKey: bytes) != nil else { return }
            state.dropTokens(ofKey: bytes)
        }
    }

    /// Installs exactly the keys of `keySet`, in one step (for a JWKS document fetched again): keys it does not
    /// hold are removed and keys it holds with other bytes replaced, as by ``removeKey(id:)`` and
    /// ``addKey(_:id:)``; tokens of keys that stay the same stay cached.
    public func replaceKeys(with keySet: AssertionKeySet) {
        state.withLock { state in
            for id in state.keys.keys where keySet.storage[id] != state.keys[id]?.key {
                state.keys.removeValue(forKey: id)
                state.dropTokens(ofKey: id)
            }
            for (id, key) in keySet.storage where state.keys[id] == nil { state.install(key, id: id) }
        }
    }

    /// The assertion `token` carries, once every check passed. Single-use mode: the token ID is then used up.
    /// Reusable mode: the token is then kept, and answered from the cache at its next uses while it is valid.
    /// The ``observer``, if any, hears the outcome first.
    public func verify(_ token: String) throws(AssertionError) -> IdentityAssertion {
        try verify(token[...])
    }

    /// `verify(_:)` of a token that is part of a larger string (a header value), without a copy.
    package func verify(_ token: Substring) throws(AssertionError) -> IdentityAssertion {
        guard let observer else { return try verified(token).assertion }
        let result: (assertion: IdentityAssertion, fromCache: Bool)
        do throws(AssertionError) {
            result = try verified(token)
        } catch {
            observer.didRefuse(error)
            throw error
        }
        observer.didAccept(result.assertion, fromCache: result.fromCache)
        return result.assertion
    }

    /// ``verify(_:)`` without the observer; `fromCache`: reusable mode answered from its token cache.
    private func verified(_ token: Substring) throws(AssertionError) -> (assertion: IdentityAssertion, fromCache: Bool) {
        switch mode {
        case .singleUse:
            let checked = try check(Array(token.utf8))
            let now = clock()
            try state.withLock { (state: inout State) throws(AssertionError) in
                try state.confirm(checked)
                try state.remember(checked.assertion, now: now, until: checked.assertion.expiresAt.addingTimeInterval(clockSkew),
                                   capacity: replayCacheCapacity)
            }
            return (checked.assertion, false)
        case .reusable:
            return try verifyReusable(token)
        }
    }

    /// Reusable mode: the cached answer for exactly these bytes, else a full verification, then cached.
    private func verifyReusable(_ token: Substring) throws(AssertionError) -> (assertion: IdentityAssertion, fromCache: Bool) {
        var token = token
        token.makeContiguousUTF8()
        let cached = token.utf8.withContiguousStorageIfAvailable { bytes in
            Result { () throws(AssertionError) -> IdentityAssertion? in
                guard bytes.count <= Self.maximumTokenLength else { throw .malformed("longer than \(Self.maximumTokenLength) bytes") }
                let key = Self.cacheKey(UnsafeRawBufferPointer(bytes))
                let now = clock().timeIntervalSince1970
                return try state.withLock { (state: inout State) throws(AssertionError) in
                    try state.cachedAssertion(key, bytes: bytes, now: now, clockSkew: clockSkew)
                }
            }
        }
        if let assertion = try cached?.get() { return (assertion, true) }

        let bytes = Array(token.utf8)
        let checked = try check(bytes)
        let key = bytes.withUnsafeBytes { Self.cacheKey($0) }
        let now = clock().timeIntervalSince1970
        try state.withLock { (state: inout State) throws(AssertionError) in
            try state.confirm(checked)
            state.cache(checked, bytes: bytes, key: key, now: now, clockSkew: clockSkew, capacity: tokenCacheCapacity)
        }
        return (checked.assertion, false)
    }

    /// The key of a token's bytes in the token cache: its last ``cacheKeyLength`` bytes, which lie in the
    /// signature (86 characters for Ed25519), read as four words and mixed with a seed drawn once per process.
    /// A SHA-256 of the whole token cost ten times as much as `Hasher` over the tail, and `Hasher` (SipHash) over
    /// the tail three times as much as this; the dictionary hashes the key again with its own seeded hasher. The
    /// cache compares every byte before it answers, and keeps only tokens that passed a full verification, so
    /// two tokens with one key cost a verification, never a wrong answer; making valid tokens collide on purpose
    /// takes a signing key.
    private static func cacheKey(_ bytes: UnsafeRawBufferPointer) -> Int {
        var key = cacheKeySeed ^ UInt64(bytes.count)
        guard bytes.count >= cacheKeyLength else {
            for byte in bytes { key = mixed(key ^ UInt64(byte)) }
            return Int(truncatingIfNeeded: key)
        }
        let tail = bytes.count - cacheKeyLength
        for word in 0..<(cacheKeyLength / 8) {
            key = mixed(key ^ bytes.loadUnaligned(fromByteOffset: tail + word * 8, as: UInt64.self))
        }
        return Int(truncatingIfNeeded: key)
    }

    /// One round of a multiply-xorshift mix (the finalizer of SplitMix64): every input bit reaches every output bit.
    @inline(__always)
    private static func mixed(_ value: UInt64) -> UInt64 {
        var z = value &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Taken once per process from `Hasher`'s own seed (random per process, fixed under
    /// `SWIFT_DETERMINISTIC_HASHING`), so that which tokens share a key cannot be computed from outside.
    private static let cacheKeySeed: UInt64 = {
        var hasher = Hasher()
        hasher.combine(0x6964_656E_7469_7479 as UInt64)
        return UInt64(truncatingIfNeeded: hasher.finalize())
    }()

    /// How many of a token's last bytes its cache key hashes.
    private static let cacheKeyLength = 32

    /// Every check but the replay cache, of the token whose UTF-8 is `bytes`.
    private func check(_ bytes: [UInt8]) throws(AssertionError) -> Checked {
        guard bytes.count <= Self.maximumTokenLength else { throw .malformed("longer than \(Self.maximumTokenLength) bytes") }
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
        let keyIDBytes = Array(keyID.utf8)
        guard let entry = state.withLock({ $0.keys[keyIDBytes] }) else { throw .unknownKey(keyID) }
        let valid: Bool
        do { valid = try entry.key.isValidSignature(signature, of: Array(bytes[..<dots[1]])) } catch {
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
        let assertion = IdentityAssertion(
            account: account, tenant: tenant, issuer: issuer, audience: audience,
            issuedAt: Date(timeIntervalSince1970: Double(issuedAt)),
            notBefore: notBefore.map { Date(timeIntervalSince1970: Double($0)) },
            expiresAt: Date(timeIntervalSince1970: Double(expiresAt)), tokenID: tokenID)
        return Checked(assertion: assertion, keyID: keyIDBytes, keyVersion: entry.version)
    }

    private static func object(_ bytes: [UInt8], _ part: String) throws(AssertionError) -> [String: StrictJSON.Value] {
        switch StrictJSON.object(bytes) {
        case let .success(members): return members
        case let .failure(failure): throw .malformed("the \(part) is not a valid JSON object: \(failure)")
        }
    }

    private static func string(_ claims: [String: StrictJSON.Value], _ name: String) throws(AssertionError) -> String {
        guard case let .string(value) = claims[name] else { throw .malformed("claims: \(name) missing or not a string") }
        return value
    }

    /// An optional string member: absent is `nil`; anything but a string, `null` included, is malformed.
    private static func optionalString(_ members: [String: StrictJSON.Value], _ name: String, in part: String) throws(AssertionError) -> String? {
        switch members[name] {
        case nil: return nil
        case let .string(value): return value
        default: throw .malformed("\(part): \(name) is not a string")
        }
    }

    private static func integer(_ claims: [String: StrictJSON.Value], _ name: String) throws(AssertionError) -> Int64 {
        guard case let .integer(value) = claims[name] else { throw .malformed("claims: \(name) missing or not an integer") }
        return value
    }

}

extension IdentityAssertionVerifier {
    /// A token that passed every check, and the version of the key that verified it.
    struct Checked {
        let assertion: IdentityAssertion
        let keyID: [UInt8]
        let keyVersion: UInt64
    }

    /// A key of the set, with the version it was installed as: a key removed and added again (or replaced) is
    /// another version, so a check against the old one is never confirmed.
    struct KeyEntry {
        let key: AssertionVerificationKey
        let version: UInt64
    }

    /// A token of reusable mode that passed every check: its exact bytes, what it asserts, and its key.
    struct CachedToken {
        let bytes: [UInt8]
        let assertion: IdentityAssertion
        let keyID: [UInt8]
        let expiresAt: Double
        let notBefore: Double?
        let issuedAt: Double
    }

    struct State {
        /// Keys by the UTF-8 of their ID: `kid` is matched byte for byte.
        var keys: [[UInt8]: KeyEntry] = [:]
        var nextVersion: UInt64 = 0
        /// Single-use mode: accepted token IDs, until their `exp` plus the skew.
        var seen: [String: Date] = [:]
        /// Reusable mode: verified tokens by the hash of their bytes (``cacheKey(_:)``).
        var tokens: [Int: CachedToken] = [:]

        mutating func install(_ key: AssertionVerificationKey, id: [UInt8]) {
            nextVersion += 1
            keys[id] = KeyEntry(key: key, version: nextVersion)
        }

        /// Drops the cached tokens verified with the key `id`.
        mutating func dropTokens(ofKey id: [UInt8]) {
            guard !tokens.isEmpty else { return }
            tokens = tokens.filter { $0.value.keyID != id }
        }

        /// Refuses a token whose key was removed or replaced while it was being checked.
        func confirm(_ checked: Checked) throws(AssertionError) {
            guard keys[checked.keyID]?.version == checked.keyVersion else {
                throw .unknownKey(String(decoding: checked.keyID, as: UTF8.self))
            }
        }

        /// Uses up the token ID of `assertion`, or refuses a replay.
        mutating func remember(_ assertion: IdentityAssertion, now: Date, until: Date, capacity: Int) throws(AssertionError) {
            if let previous = seen[assertion.tokenID], previous > now { throw .replayed(tokenID: assertion.tokenID) }
            if seen.count >= capacity {
                seen = seen.filter { $0.value > now }
                guard seen.count < capacity else { throw .replayCacheFull }
            }
            seen[assertion.tokenID] = until
        }

        /// The cached assertion of the token whose bytes are `bytes`, when it is cached and valid at `now`;
        /// `nil` when it is not cached (or another token has its key); the time error when it is cached but
        /// not valid now (an expired token leaves the cache).
        mutating func cachedAssertion(
            _ key: Int, bytes: UnsafeBufferPointer<UInt8>, now: Double, clockSkew: TimeInterval
        ) throws(AssertionError) -> IdentityAssertion? {
            guard let entry = tokens[key],
                  entry.bytes.withUnsafeBufferPointer({ cached in
                      // A cached token is never empty (it has three parts), so both addresses exist.
                      cached.count == bytes.count && memcmp(cached.baseAddress!, bytes.baseAddress!, bytes.count) == 0
                  })
            else { return nil }
            guard entry.expiresAt + clockSkew > now else {
                tokens.removeValue(forKey: key)
                throw .expired(at: Date(timeIntervalSince1970: entry.expiresAt))
            }
            if let notBefore = entry.notBefore, notBefore - clockSkew > now {
                throw .notYetValid(until: Date(timeIntervalSince1970: notBefore))
            }
            guard entry.issuedAt - clockSkew <= now else { throw .notYetValid(until: Date(timeIntervalSince1970: entry.issuedAt)) }
            return entry.assertion
        }

        /// Keeps `checked` (whose bytes are `bytes`), making room when the cache is full: expired entries first,
        /// then arbitrary ones down to 7/8 of `capacity`.
        mutating func cache(
            _ checked: Checked, bytes: [UInt8], key: Int, now: Double, clockSkew: TimeInterval, capacity: Int
        ) {
            if tokens[key] == nil, tokens.count >= capacity {
                tokens = tokens.filter { $0.value.expiresAt + clockSkew > now }
                if tokens.count >= capacity {
                    let keep = capacity - max(1, capacity / 8)
                    tokens = Dictionary(uniqueKeysWithValues: tokens.prefix(keep).map { ($0.key, $0.value) })
                }
            }
            let assertion = checked.assertion
            tokens[key] = CachedToken(
                bytes: bytes, assertion: assertion, keyID: checked.keyID, expiresAt: assertion.expiresAt.timeIntervalSince1970,
                notBefore: assertion.notBefore?.timeIntervalSince1970, issuedAt: assertion.issuedAt.timeIntervalSince1970)
        }
    }
}
