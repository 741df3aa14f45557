import Foundation
import IdentityAssertions
import IdentityCrypto
import IdentityRuntime
import Synchronization

/// The `assertion-verify` pair: what verifying a signed identity assertion costs against its floor.
/// - **raw**: one bare Ed25519 verification of a token's signing input (`AssertionVerificationKey.isValidSignature`:
///   the strict pre-check, then one `crypto_sign_verify_detached` of libsodium on Linux);
/// - **peer**: the same verification plus what a straightforward verifier adds: base64url through
///   Foundation, `JSONSerialization` for the header and `JSONDecoder` for the claims (the shape of this
///   project's verifier before it read the JSON in one strict pass);
/// - **ours**: `IdentityAssertionVerifier.verify`, every check including the replay cache.
///
/// Each operation verifies a distinct token (a pool signed once, 256 tokens: small enough that signing it does
/// not dominate a run under callgrind); every pass over the pool uses a new verifier, so no token is a replay.
extension BenchCommand {
    struct AssertionPool: Sendable {
        let key: AssertionSigningKey
        let tokens: [String]
        let signingInputs: [[UInt8]]
        let signatures: [[UInt8]]

        static let shared: AssertionPool = {
            do {
                let key = try AssertionSigningKey()
                let signer = IdentityAssertionSigner(key: key, keyID: "bench", issuer: "frontend")
                let tokens = try (0..<256).map { index in
                    try signer.sign(account: Identity("user\(index % 64)@tenant\(index % 8).example"),
                                    tenant: "tenant\(index % 8).example", audience: "documents", lifetime: 3_600)
                }
                let parts = tokens.map { $0.split(separator: ".").map(String.init) }
                return AssertionPool(
                    key: key, tokens: tokens, signingInputs: parts.map { Array(($0[0] + "." + $0[1]).utf8) },
                    signatures: parts.map { Data(base64URL: $0[2]).map(Array.init) ?? [] })
            } catch {
                fatalError("bench: signing the assertion pool failed: \(error)")
            }
        }()

        func verifier() -> IdentityAssertionVerifier {
            IdentityAssertionVerifier(keys: ["bench": key.publicKey], issuers: ["frontend"], audience: "documents")
        }

        /// `total` bare Ed25519 verifications of the pool's signing inputs, in turn (the raw side of the
        /// verify pairs); how many verified.
        func rawVerifications(_ total: Int) -> Int {
            var hits = 0
            for index in 0..<total {
                let slot = index % tokens.count
                if (try? key.publicKey.isValidSignature(signatures[slot], of: signingInputs[slot])) == true {
                    hits &+= 1
                }
            }
            return hits
        }

        /// `total` single-use verifications of the pool's tokens, in turn, a new verifier for every pass over
        /// the pool (so no token is a replay); how many were accepted.
        func verifications(_ total: Int) -> Int {
            var hits = 0
            var verifier = self.verifier()
            for index in 0..<total {
                let slot = index % tokens.count
                if slot == 0 { verifier = self.verifier() }
                if (try? verifier.verify(tokens[slot])) != nil { hits &+= 1 }
            }
            return hits
        }
    }

    private struct PeerHeader: Decodable {
        let alg: String
        let kid: String?
        let typ: String?
    }

    private struct PeerClaims: Decodable {
        let sub: String
        let iss: String
        let aud: String
        let iat: Int64
        let exp: Int64
        let jti: String
        let tid: String?
    }

    static func assertionPair(operations: Int) -> Pair {
        let accepted = Mutex(0)
        func count(_ hits: Int) { accepted.withLock { $0 &+= hits } }
        return Pair(
            name: "assertion-verify", title: "verify a signed identity assertion (Ed25519)", targetRatio: nil,
            operations: operations,
            raw: { total in count(AssertionPool.shared.rawVerifications(total)) },
            peer: { total in
                let pool = AssertionPool.shared
                var hits = 0
                let decoder = JSONDecoder()
                for index in 0..<total {
                    let parts = pool.tokens[index % pool.tokens.count].split(separator: ".")
                    guard parts.count == 3, let header = Data(base64URL: String(parts[0])),
                          let claims = Data(base64URL: String(parts[1])), let signature = Data(base64URL: String(parts[2])),
                          (try? JSONSerialization.jsonObject(with: header)) is [String: Any],
                          let decodedHeader = try? decoder.decode(PeerHeader.self, from: header), decodedHeader.alg == "EdDSA",
                          (try? pool.key.publicKey.isValidSignature(Array(signature), of: Array((parts[0] + "." + parts[1]).utf8))) == true,
                          (try? JSONSerialization.jsonObject(with: claims)) is [String: Any],
                          let decoded = try? decoder.decode(PeerClaims.self, from: claims), decoded.aud == "documents"
                    else { continue }
                    hits &+= 1
                }
                count(hits)
            },
            ours: { total in count(AssertionPool.shared.verifications(total)) })
    }
}

extension BenchCommand {
    /// The `assertion-sign` pair: what signing an identity assertion costs against its floor.
    /// - **raw**: one bare Ed25519 signature of a token's signing input (`AssertionSigningKey.signature(of:)`);
    /// - **peer**: what a straightforward signer writes: `JSONSerialization` for header and claims, base64url
    ///   through Foundation, a fresh `UUID` token ID, then the same signature (the shape of this project's signer
    ///   before it wrote its JSON itself);
    /// - **ours**: `IdentityAssertionSigner.sign(account:tenant:audience:)`.
    static func assertionSignPair(operations: Int) -> Pair {
        let signed = Mutex(0)
        func count(_ bytes: Int) { signed.withLock { $0 &+= bytes } }
        return Pair(
            name: "assertion-sign", title: "sign an identity assertion (Ed25519)", targetRatio: nil,
            operations: operations,
            raw: { total in
                let pool = AssertionPool.shared
                var bytes = 0
                for index in 0..<total {
                    bytes &+= (try? pool.key.signature(of: pool.signingInputs[index % pool.signingInputs.count]))?.count ?? 0
                }
                count(bytes)
            },
            peer: { total in
                let pool = AssertionPool.shared
                var bytes = 0
                for index in 0..<total {
                    let now = Int64(Date().timeIntervalSince1970)
                    let claims: [String: Any] = [
                        "sub": "user\(index % 64)@tenant\(index % 8).example", "tid": "tenant\(index % 8).example",
                        "iss": "frontend", "aud": "documents", "jti": UUID().uuidString, "iat": now, "exp": now + 300,
                    ]
                    guard let header = try? JSONSerialization.data(
                              withJSONObject: ["alg": "EdDSA", "kid": "bench", "typ": "JWT"], options: [.sortedKeys, .withoutEscapingSlashes]),
                          let body = try? JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes])
                    else { continue }
                    let input = header.base64URL + "." + body.base64URL
                    guard let signature = try? pool.key.signature(of: Array(input.utf8)) else { continue }
                    bytes &+= (input + "." + Data(signature).base64URL).utf8.count
                }
                count(bytes)
            },
            ours: { total in
                let pool = AssertionPool.shared
                let signer = IdentityAssertionSigner(key: pool.key, keyID: "bench", issuer: "frontend")
                var bytes = 0
                for index in 0..<total {
                    bytes &+= (try? signer.sign(
                        account: Identity("user\(index % 64)@tenant\(index % 8).example"), tenant: "tenant\(index % 8).example",
                        audience: "documents"))?.utf8.count ?? 0
                }
                count(bytes)
            })
    }
}

extension Data {
    /// base64url without padding, through Foundation (the peer's encoder).
    var base64URL: String {
        var text = base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// base64url without padding, through Foundation (the peer's decoder).
    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }
}

extension BenchCommand {
    /// The `assertion-verify-cached` pair: what a reusable verifier costs for a token it has verified before
    /// (a client's bearer token at its second and later requests).
    /// - **raw**: one bare hash of the token's bytes with Swift's `Hasher` (the key of the cache: the floor);
    /// - **peer**: what a straightforward cache writes: the token `String` as the key of a dictionary of verified
    ///   assertions behind a lock, then the expiry check;
    /// - **ours**: `IdentityAssertionVerifier.verify` in reusable mode: hash, lookup, the whole token compared,
    ///   expiry and not-before checked against the clock.
    ///
    /// The pool's 256 tokens are verified in full once, in the warm-up (which the callgrind script's `--count 0`
    /// run repeats, so the counts are the cached verifications only). A single-use verification, which this
    /// replaces at every request, is the `assertion-verify` pair.
    /// The reusable verifier of `assertion-verify-cached`, made at its first use.
    static let cachedPairVerifier = IdentityAssertionVerifier(
        keys: ["bench": AssertionPool.shared.key.publicKey], issuers: ["frontend"], audience: "documents", mode: .reusable)

    /// Verifies `total` tokens of the pool in turn with ``cachedPairVerifier``; returns how many it accepted and
    /// `accepts` then accepted too.
    static func cachedVerifications(_ total: Int, accepts: (IdentityAssertion) -> Bool = { _ in true }) -> Int {
        let pool = AssertionPool.shared
        let verifier = cachedPairVerifier
        var hits = 0
        for index in 0..<total {
            if let assertion = try? verifier.verify(pool.tokens[index % pool.tokens.count]), accepts(assertion) {
                hits &+= 1
            }
        }
        return hits
    }

    static func assertionCachedPair(operations: Int) -> Pair {
        let accepted = Mutex(0)
        func count(_ hits: Int) { accepted.withLock { $0 &+= hits } }
        let peerCache = Mutex<[String: IdentityAssertion]>([:])
        // The pool and the verifier are made when the pair first runs, not when the list of pairs is made: every
        // other pair's run would otherwise start from a heap that 256 signed tokens went through.
        return Pair(
            name: "assertion-verify-cached", title: "verify a reusable token verified before (hash, cache)",
            targetRatio: nil, operations: operations,
            raw: { total in
                let pool = AssertionPool.shared
                var hits = 0
                for index in 0..<total {
                    let token = pool.tokens[index % pool.tokens.count]
                    let key = Array(token.utf8).withUnsafeBytes { bytes in
                        var hasher = Hasher()
                        hasher.combine(bytes: bytes)
                        return hasher.finalize()
                    }
                    if key != 0 { hits &+= 1 }
                }
                count(hits)
            },
            peer: { total in
                let pool = AssertionPool.shared
                var hits = 0
                for index in 0..<total {
                    let token = pool.tokens[index % pool.tokens.count]
                    let now = Date()
                    let cached = peerCache.withLock { $0[token] }
                    if let cached, cached.expiresAt > now {
                        hits &+= 1
                    } else if let assertion = try? pool.verifier().verify(token) {
                        peerCache.withLock { $0[token] = assertion }
                        hits &+= 1
                    }
                }
                count(hits)
            },
            ours: { total in count(cachedVerifications(total)) })
    }
}

extension BenchCommand {
    /// The `assertion-verify-fresh` pair: a fresh token's verification with libsodium against the same with
    /// libcrypto only, in one run (the backends accept the same tokens: see `Ed25519.isStrictlyEncoded`).
    /// - **raw**: one bare Ed25519 verification (`AssertionVerificationKey.isValidSignature`: the pre-check,
    ///   then libsodium), the floor;
    /// - **peer**: `IdentityAssertionVerifier.verify` with libcrypto's `EVP_DigestVerify` (`Ed25519.libcryptoOnly`:
    ///   the verifier as it was before libsodium, and the fallback when `sodium_init()` fails);
    /// - **ours**: `IdentityAssertionVerifier.verify` as shipped: libsodium on Linux when it loaded at run time
    ///   (`Sodium`), libcrypto otherwise (`IDENTITY_SODIUM=off`, or no libsodium on the machine); the row's title
    ///   and the line above the table say which backend ran.
    ///
    /// The same pool and single-use verifiers as `assertion-verify` (each operation a distinct token, never a
    /// replay). ours/peer is the gain of libsodium per fresh token.
    static func assertionFreshPair(operations: Int) -> Pair {
        let accepted = Mutex(0)
        func count(_ hits: Int) { accepted.withLock { $0 &+= hits } }
        return Pair(
            name: "assertion-verify-fresh",
            title: "verify a fresh token: \(Ed25519.verificationBackend) (ours) against libcrypto only (peer)",
            targetRatio: nil, operations: operations,
            raw: { total in
                Ed25519.libcryptoOnly.store(false, ordering: .relaxed)
                count(AssertionPool.shared.rawVerifications(total))
            },
            peer: { total in
                Ed25519.libcryptoOnly.store(true, ordering: .relaxed)
                count(AssertionPool.shared.verifications(total))
                Ed25519.libcryptoOnly.store(false, ordering: .relaxed)
            },
            ours: { total in
                Ed25519.libcryptoOnly.store(false, ordering: .relaxed)
                count(AssertionPool.shared.verifications(total))
            })
    }
}
