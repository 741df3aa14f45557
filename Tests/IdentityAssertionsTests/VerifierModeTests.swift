import Foundation
@testable import IdentityAssertions
import IdentityRuntime
import Testing

/// A fixture whose verifier keeps bearer tokens (reusable mode).
struct ReusableFixture {
    let base: AssertionFixture
    let verifier: IdentityAssertionVerifier

    init(capacity: Int = 10_000) throws {
        base = try AssertionFixture()
        let clock = base.clock
        verifier = IdentityAssertionVerifier(
            keys: ["k1": base.key.publicKey], issuers: ["frontend"], audience: "documents", mode: .reusable,
            tokenCacheCapacity: capacity, clock: { clock.date })
    }

    /// Two tokens verified (so cached): alice's of key `k1`, bob's of a second key `k2`.
    func twoCachedTokens() throws -> (k1: String, k2: String) {
        let tokens = (k1: try base.token(), k2: try base.tokenOfSecondKey(addedTo: verifier))
        _ = try verifier.verify(tokens.k1)
        _ = try verifier.verify(tokens.k2)
        #expect(verifier.cachedTokenCount == 2)
        return tokens
    }
}

@Suite("Verifier modes: single-use assertions and reusable bearer tokens")
struct VerifierModeTests {
    @Test("the default mode is single-use: a token ID is accepted once")
    func defaultIsSingleUse() throws {
        let f = try AssertionFixture()
        #expect(f.verifier.mode == .singleUse)
        let token = try f.token()
        _ = try f.verifier.verify(token)
        #expect(refusalCode(f.verifier, token) == 10)
    }

    @Test("reusable: the same token is accepted at every use, with the same assertion, and not used up")
    func reusableAcceptsAgain() throws {
        let f = try ReusableFixture()
        let token = try f.base.token()
        let first = try f.verifier.verify(token)
        for _ in 0..<5 { #expect(try f.verifier.verify(token) == first) }
        #expect(f.verifier.cachedTokenCount == 1)
        // A single-use verifier over the same key still refuses the second use.
        _ = try f.base.verifier.verify(token)
        #expect(refusalCode(f.base.verifier, token) == 10)
    }

    @Test("reusable: only the exact bytes are recognized; another token is verified in full and refused as it would be")
    func exactBytes() throws {
        let f = try ReusableFixture()
        let token = try f.base.token()
        _ = try f.verifier.verify(token)
        #expect(refusalCode(f.verifier, token + " ") == 1)
        #expect(refusalCode(f.verifier, token + "A") == 5)
        #expect(refusalCode(f.verifier, " " + token) == 1)
        var bytes = Array(token.utf8)
        bytes[bytes.count - 2] = bytes[bytes.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(refusalCode(f.verifier, String(decoding: bytes, as: UTF8.self)) != nil)
        #expect(f.verifier.cachedTokenCount == 1)
        #expect(try f.verifier.verify(token).account == "alice@contoso.com")
    }

    @Test("reusable: a token that ends as a cached one (its cache key) but differs before is verified in full and refused")
    func sameTailIsNotTheToken() throws {
        let f = try ReusableFixture()
        let token = try f.base.token()
        _ = try f.verifier.verify(token)
        // Every byte of the header, the claims and the signature's head changed in turn, the last 32 kept: each
        // finds the cached entry by its key, and none is answered from it.
        var bytes = Array(token.utf8)
        for index in stride(from: 0, to: bytes.count - 32, by: 7) {
            let original = bytes[index]
            bytes[index] = original == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            #expect(refusalCode(f.verifier, String(decoding: bytes, as: UTF8.self)) != nil, "byte \(index)")
            bytes[index] = original
        }
        #expect(f.verifier.cachedTokenCount == 1)
        #expect(try f.verifier.verify(token).account == "alice@contoso.com")
    }

    @Test("reusable: a string Swift finds equal to a cached token (the Kelvin sign for K) is not that token")
    func canonicalEquivalentIsNotTheToken() throws {
        let f = try ReusableFixture()
        var token = try f.base.token()
        while !token.contains("K") { token = try f.base.token() }
        _ = try f.verifier.verify(token)
        let lookalike = token.replacingOccurrences(of: "K", with: "\u{212A}")
        #expect(lookalike == token)
        #expect(refusalCode(f.verifier, lookalike) == 1)
        #expect(f.verifier.cachedTokenCount == 1)
    }

    @Test("reusable: refused tokens are never cached, and the audience, issuer and lifetime rules are the same")
    func sameRules() throws {
        let f = try ReusableFixture()
        let wrongAudience = try f.base.token(audience: "billing")
        #expect(refusalCode(f.verifier, wrongAudience) == 8)
        #expect(refusalCode(f.verifier, wrongAudience) == 8)
        let tooLong = try f.base.token(lifetime: 7_200)
        #expect(refusalCode(f.verifier, tooLong) == 13)
        let other = IdentityAssertionSigner(key: f.base.key, keyID: "k1", issuer: "elsewhere")
        let wrongIssuer = try other.sign(account: "alice@contoso.com", audience: "documents", now: f.base.clock.date)
        #expect(refusalCode(f.verifier, wrongIssuer) == 9)
        #expect(refusalCode(f.verifier, String(repeating: "a", count: IdentityAssertionVerifier.maximumTokenLength + 1)) == 1)
        #expect(f.verifier.cachedTokenCount == 0)
    }

    @Test("reusable: a cached token checks the clock at each use: refused once expired (beyond the skew), never again accepted")
    func cachedExpiry() throws {
        let f = try ReusableFixture()
        let token = try f.base.token(lifetime: 300)
        _ = try f.verifier.verify(token)
        f.base.clock.advance(300 + 59)
        _ = try f.verifier.verify(token)
        f.base.clock.advance(1)
        #expect(refusalCode(f.verifier, token) == 6)
        #expect(f.verifier.cachedTokenCount == 0)
        #expect(refusalCode(f.verifier, token) == 6)
    }

    @Test("reusable: not-before and issued-at are checked at each use too, also when the clock goes back")
    func cachedNotBefore() throws {
        let f = try ReusableFixture()
        let start = f.base.clock.date
        let token = try f.base.token(lifetime: 600, notBefore: start.addingTimeInterval(120))
        #expect(refusalCode(f.verifier, token) == 7)
        #expect(f.verifier.cachedTokenCount == 0)
        f.base.clock.advance(61)
        _ = try f.verifier.verify(token)
        #expect(f.verifier.cachedTokenCount == 1)
        f.base.clock.advance(-2)
        #expect(refusalCode(f.verifier, token) == 7)
        f.base.clock.advance(2)
        _ = try f.verifier.verify(token)
        // iat: a token issued "later" than the clock, once the clock went back.
        let issued = try f.base.token(lifetime: 300)
        _ = try f.verifier.verify(issued)
        f.base.clock.advance(-61 - 61)
        #expect(refusalCode(f.verifier, issued) == 7)
    }

    @Test("reusable: removing the key drops its cached tokens; adding it back verifies them in full again")
    func keyRemoval() throws {
        let f = try ReusableFixture()
        let (token, kept) = try f.twoCachedTokens()
        f.verifier.removeKey(id: "k1")
        #expect(f.verifier.cachedTokenCount == 1)
        #expect(refusalCode(f.verifier, token) == 4)
        #expect(try f.verifier.verify(kept).account == "bob@contoso.com")
        f.verifier.addKey(f.base.key.publicKey, id: "k1")
        #expect(try f.verifier.verify(token).account == "alice@contoso.com")
    }

    @Test("reusable: replacing a key ID's key drops the tokens of the old key; adding the same key again keeps them")
    func keyReplacement() throws {
        let f = try ReusableFixture()
        let token = try f.base.token()
        _ = try f.verifier.verify(token)
        f.verifier.addKey(f.base.key.publicKey, id: "k1")
        #expect(f.verifier.cachedTokenCount == 1)
        f.verifier.addKey(try AssertionSigningKey().publicKey, id: "k1")
        #expect(f.verifier.cachedTokenCount == 0)
        #expect(refusalCode(f.verifier, token) == 5)
    }

    @Test("replaceKeys(with:) installs exactly the new set: unchanged keys keep their tokens, dropped keys lose them")
    func replaceKeySet() throws {
        let f = try ReusableFixture()
        let (token1, token2) = try f.twoCachedTokens()
        var next = f.verifier.keySet
        #expect(next.keyIDs == ["k1", "k2"])
        next.removeKey(id: "k2")
        next.addKey(try AssertionSigningKey().publicKey, id: "k3")
        f.verifier.replaceKeys(with: next)
        #expect(f.verifier.keyIDs == ["k1", "k3"])
        #expect(f.verifier.cachedTokenCount == 1)
        #expect(try f.verifier.verify(token1).account == "alice@contoso.com")
        #expect(refusalCode(f.verifier, token2) == 4)
    }

    @Test("reusable: the cache holds at most its capacity; evicted tokens are verified in full and still accepted", arguments: [1, 8])
    func boundedCache(capacity: Int) throws {
        let f = try ReusableFixture(capacity: capacity)
        let tokens = try (0..<20).map { index in try f.base.token(account: Identity("user\(index)@contoso.com")) }
        for round in 0..<3 {
            for (index, token) in tokens.enumerated() {
                #expect(try f.verifier.verify(token).account == Identity("user\(index)@contoso.com"), "round \(round)")
                #expect(f.verifier.cachedTokenCount <= capacity)
            }
        }
        // Expired entries leave first: after the clock passed every token's expiry, all are refused.
        f.base.clock.advance(300 + 61)
        for token in tokens { #expect(refusalCode(f.verifier, token) == 6) }
    }

    @Test("single-use: a key removed while a token is being checked refuses it (the key is confirmed with the replay step)")
    func singleUseConfirmsKey() throws {
        let f = try AssertionFixture()
        let token = try f.token()
        f.verifier.removeKey(id: "k1")
        #expect(refusalCode(f.verifier, token) == 4)
        f.verifier.addKey(f.key.publicKey, id: "k1")
        #expect(try f.verifier.verify(token).account == "alice@contoso.com")
    }

    /// Many tasks verify, add and remove keys at once; a token whose verification started after its key's
    /// `removeKey` returned must never be accepted.
    @Test("stress: no token is accepted after its key's removal returned", arguments: [
        (IdentityAssertionVerifier.Mode.reusable, 2), (.reusable, 8), (.singleUse, 8),
    ])
    func removalStress(mode: IdentityAssertionVerifier.Mode, tasks: Int) async throws {
        let keyCount = 8
        let clock = TestClock()
        let keys = try (0..<keyCount).map { _ in try AssertionSigningKey() }
        let verifier = IdentityAssertionVerifier(
            keys: Dictionary(uniqueKeysWithValues: keys.enumerated().map { ("k\($0.offset)", $0.element.publicKey) }),
            issuers: ["frontend"], audience: "documents", mode: mode, tokenCacheCapacity: 64, clock: { clock.date })
        // Reusable: one token per key, used over and over. Single-use: a fresh token per attempt.
        let perKey = mode == .reusable ? 1 : 24 * tasks
        let tokens: [[String]] = try keys.enumerated().map { index, key in
            let signer = IdentityAssertionSigner(key: key, keyID: "k\(index)", issuer: "frontend")
            return try (0..<perKey).map { _ in try signer.sign(account: "alice@contoso.com", audience: "documents", now: clock.date) }
        }
        let sequence = LockedValue(1)
        // removedAt[i]: the sequence number taken right after removeKey("k\(i)") returned (0: not removed).
        let removedAt = LockedValue([Int](repeating: 0, count: keyCount))
        let violations = LockedValue(0), next = LockedValue(0)

        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<tasks {
                group.addTask {
                    for attempt in 0..<(24 * keyCount) {
                        let index = (attempt + worker) % keyCount
                        let token = mode == .reusable ? tokens[index][0] : tokens[index][next.withLock { $0 += 1; return $0 } % perKey]
                        let start = sequence.withLock { $0 }
                        if (try? verifier.verify(token)) != nil {
                            let removal = removedAt.withLock { $0[index] }
                            if removal != 0, removal <= start { violations.withLock { $0 += 1 } }
                        }
                    }
                }
            }
            // Churn: keys come and go beside the ones under test.
            group.addTask {
                for round in 0..<200 {
                    verifier.addKey(keys[round % keyCount].publicKey, id: "churn\(round % 5)")
                    verifier.removeKey(id: "churn\((round + 2) % 5)")
                    await Task.yield()
                }
            }
            // The removals, one key at a time, while the workers verify.
            group.addTask {
                for index in 0..<keyCount {
                    for _ in 0..<20 { await Task.yield() }
                    verifier.removeKey(id: "k\(index)")
                    let now = sequence.withLock { $0 += 1; return $0 }
                    removedAt.withLock { $0[index] = now }
                }
            }
        }
        #expect(violations.withLock { $0 } == 0)
        // Every key is gone: nothing verifies any more.
        for index in 0..<keyCount { #expect(refusalCode(verifier, tokens[index][0]) == 4 || refusalCode(verifier, tokens[index][0]) == 10) }
        #expect(verifier.cachedTokenCount == 0)
    }
}
