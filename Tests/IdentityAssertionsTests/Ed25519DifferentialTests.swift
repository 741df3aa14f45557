// The libcrypto branch only: Checks/SwiftCrypto compiles this target on swift-crypto (IDENTITY_SWIFT_CRYPTO),
// where neither libcrypto's Ed25519 nor libsodium verifies.
#if os(Linux) && !IDENTITY_SWIFT_CRYPTO
import Foundation
import IdentityCrypto
import IdentityTesting
import Testing

/// libsodium 1.0.18 against libcrypto (OpenSSL 3.0) against our verifier (``Ed25519/PublicKey/isValidSignature(_:of:)``:
/// the strict pre-check, then libsodium), on valid signatures and adversarial ones.
///
/// What it asserts, on every case:
/// - our verifier accepts exactly what libcrypto accepts among the cases that pass the pre-check
///   (``Ed25519/isStrictlyEncoded(signature:publicKey:)``): `ours == pre && libcrypto`; the libcrypto fallback
///   (`sodium_init()` failed) computes `pre && libcrypto`, so both backends of our verifier give one answer;
/// - libsodium and libcrypto agree on every case that passes the pre-check.
///
/// On raw inputs the two libraries do not agree, and that is why the pre-check exists. Found by this test,
/// always libcrypto accepting and libsodium refusing (10,010 cases from the default seed: 788 forgeries under
/// small-order keys, 689 with a small-order R, 2 all-zero; 100,001 cases from seed 20261124: 7,872, 7,080 and
/// 23; none of them passes the pre-check):
/// - small-order public keys: `(R = [r]B, S = r)` under a key of small order verifies with libcrypto for
///   every message whose `k = H(R ‖ A ‖ M)` is a multiple of 8 (one in 8 messages; the test searches for
///   them): a universal forgery under the identity key, the point of order 2, those of order 4 and 8, their
///   "negative zero" encodings and their non-canonical encodings y + p (libcrypto reduces y modulo p);
/// - small-order `R`: `(R = T, S = k·a)` under a key `A + T'` of mixed order whenever `[−k]T' = T` (and
///   `R` the identity under a plain key): libcrypto accepts, libsodium refuses any `R` of small order
///   (all 8 canonical encodings were accepted by libcrypto);
/// - all zeros: the key and `R` are the point of order 4 whose y is 0, `S = 0`: libcrypto accepts it for one
///   message in four.
/// Both refuse `S ≥ L` (S + L, S + k·2^252), non-canonical `R`, encodings that are not points, and agree on
/// keys of mixed order (a key plus a point of small order): both verify cofactorless, and accept exactly when
/// `[k]T = 0`.
///
/// Size: 10,000 cases (seeded); `IDENTITY_LONG_TESTS=1` (the full lane) makes it 100,000;
/// `IDENTITY_STRESS_SEED` changes the seed.
@Suite("Ed25519: libsodium, libcrypto and our verifier, differentially")
struct Ed25519DifferentialTests {
    enum Category: String, CaseIterable, Sendable {
        case valid = "valid signature"
        case flipR = "bit flip in R"
        case flipS = "bit flip in S"
        case flipA = "bit flip in A"
        case flipMessage = "bit flip in the message"
        case scalarTooLarge = "S + L, S + k·2^252"
        case smallOrderKey = "small-order A (all encodings), forged"
        case smallOrderR = "small-order R (all encodings)"
        case mixedOrderKey = "mixed-order A (key + torsion)"
        case nonCanonical = "non-canonical y ≥ p as A or R"
        case extremes = "all-zero / all-ones"
    }

    struct Tally: CustomStringConvertible {
        var cases = 0
        var precheckPassed = 0
        var libsodiumAccepted = 0
        var libcryptoAccepted = 0
        var oursAccepted = 0
        /// libsodium ≠ libcrypto on the raw input (all of them must fail the pre-check).
        var rawDisagreements = 0
        var disagreementsPassingPrecheck = 0
        var mismatches = 0
        /// The distinct public keys and R of the raw disagreements.
        var disagreeingKeys = Set<[UInt8]>()
        var disagreeingR = Set<[UInt8]>()
        /// Accepted by ours with a key, R or S of all zeros or all ones.
        var acceptedExtremes = 0
        var examples: [String] = []

        var description: String {
            "\(cases) cases, \(precheckPassed) pass the pre-check; accepted: libsodium \(libsodiumAccepted), "
                + "libcrypto \(libcryptoAccepted), ours \(oursAccepted); raw disagreements \(rawDisagreements) "
                + "(after the pre-check \(disagreementsPassingPrecheck); \(disagreeingKeys.count) distinct A, \(disagreeingR.count) distinct R); ours ≠ pre-check ∧ libcrypto: \(mismatches)"
        }
    }

    static let totalCases = ProcessInfo.processInfo.environment["IDENTITY_LONG_TESTS"] == "1" ? 100_000 : 10_000
    static let seed = ProcessInfo.processInfo.environment["IDENTITY_STRESS_SEED"].flatMap(UInt64.init) ?? 0x5EED_ED25_519

    /// The machine's libsodium (`libsodium.so.23`, Debian's `libsodium23`) loads, unless `IDENTITY_SODIUM=off`
    /// keeps it out; without it the process says libcrypto and why.
    @Test("libsodium loads at run time when the system has it, and IDENTITY_SODIUM=off keeps it out")
    func sodiumLoadsAtRunTime() {
        let disabled = ProcessInfo.processInfo.environment["IDENTITY_SODIUM"] == "off"
        // Asked of the dynamic linker, not of the file system: a file that is there but does not load (hidden,
        // truncated, another architecture's) is no libsodium. The handle stays open, as the verifier's does.
        let present = Sodium.libraryNames.contains { dlopen($0, RTLD_NOW | RTLD_LOCAL) != nil }
        if disabled {
            #expect(Sodium.library == nil)
            #expect(Sodium.backendDescription == "libcrypto (libsodium not used: IDENTITY_SODIUM=off)")
        } else if present {
            #expect(Ed25519.sodiumReady)
            #expect(Sodium.backendDescription.hasPrefix("libsodium (libsodium.so"))
        } else {
            #expect(Sodium.library == nil)
            #expect(Sodium.backendDescription.hasPrefix("libcrypto (libsodium not used: not found: "))
        }
    }

    @Test("the strictness tests' forgeries: libcrypto accepts them raw, libsodium and our verifier refuse them",
          arguments: [Ed25519StrictnessTests.identityKeyForgery, Ed25519StrictnessTests.smallOrderR, Ed25519StrictnessTests.allZeros])
    func rawForgeries(_ vector: Ed25519StrictnessTests.Vector) throws {
        let key = Ed25519.PublicKey(rawRepresentation: vector.publicKey)
        #expect(try key.libcryptoVerify(vector.signature, of: vector.message))
        #expect(key.sodiumVerify(vector.signature, of: vector.message) != true)
        #expect(Ed25519.isStrictlyEncoded(signature: vector.signature, publicKey: vector.publicKey) == false)
        #expect(try key.isValidSignature(vector.signature, of: vector.message) == false)
    }

    @Test("every category: our verifier accepts exactly what the pre-check and libcrypto accept, on both backends, and the libraries agree past the pre-check",
          .enabled(if: SodiumArithmetic.isAvailable, "the case generator computes with the system's libsodium"),
          arguments: Category.allCases)
    func differential(_ category: Category) throws {
        let index = UInt64(Category.allCases.firstIndex(of: category)!)
        var generator = Ed25519CaseGenerator(seed: Self.seed &+ index &* 0x9E37_79B9)
        let count = (Self.totalCases + Category.allCases.count - 1) / Category.allCases.count
        var tally = Tally()
        for _ in 0..<count {
            let sample = generator.make(category)
            try check(sample, into: &tally)
        }
        print("Ed25519 differential, \(category.rawValue): \(tally)")
        for example in tally.examples { print("  libsodium ≠ libcrypto: \(example)") }
        #expect(tally.mismatches == 0)
        #expect(tally.disagreementsPassingPrecheck == 0)
        switch category {
        case .valid:
            #expect(tally.oursAccepted == count && tally.libsodiumAccepted == count && tally.libcryptoAccepted == count)
        case .scalarTooLarge, .nonCanonical, .smallOrderKey, .smallOrderR:
            #expect(tally.oursAccepted == 0)
        case .extremes:
            // Only the unmodified valid signature (one of the 48 combinations) is accepted.
            #expect(tally.acceptedExtremes == 0 && tally.oursAccepted < count / 16)
        case .mixedOrderKey:
            // About 1 in 8 to 1 in 2 of the signatures under A + T verify (when [k]T = 0), with both libraries.
            #expect(tally.oursAccepted > 0 && tally.oursAccepted < count)
        case .flipR, .flipS, .flipA, .flipMessage:
            break
        }
    }

    private func check(_ sample: Ed25519Sample, into tally: inout Tally) throws {
        let key = Ed25519.PublicKey(rawRepresentation: sample.publicKey)
        let pre = Ed25519.isStrictlyEncoded(signature: sample.signature, publicKey: sample.publicKey)
        let libcrypto = try key.libcryptoVerify(sample.signature, of: sample.message)
        // Without libsodium in the process, its column is libcrypto's: the comparison of the libraries is moot,
        // and what is checked is that our verifier with its fallback gives the pre-check's and libcrypto's answer.
        let sodium = key.sodiumVerify(sample.signature, of: sample.message) ?? libcrypto
        let ours = try key.isValidSignature(sample.signature, of: sample.message)
        let oursOnLibcrypto = try key.isValidSignature(sample.signature, of: sample.message, backend: .libcrypto)
        if ours != oursOnLibcrypto { tally.mismatches += 1 }
        tally.cases += 1
        if pre { tally.precheckPassed += 1 }
        if sodium { tally.libsodiumAccepted += 1 }
        if libcrypto { tally.libcryptoAccepted += 1 }
        if ours { tally.oursAccepted += 1 }
        if sodium != libcrypto {
            tally.rawDisagreements += 1
            if pre { tally.disagreementsPassingPrecheck += 1 }
            tally.disagreeingKeys.insert(sample.publicKey)
            tally.disagreeingR.insert(Array(sample.signature[..<32]))
            if tally.examples.count < 3 {
                tally.examples.append("A \(hex(sample.publicKey)) R \(hex(Array(sample.signature[..<32]))) "
                    + "S \(hex(Array(sample.signature[32...]))): libsodium \(sodium), libcrypto \(libcrypto), pre-check \(pre)")
            }
        }
        if ours != (pre && libcrypto) { tally.mismatches += 1 }
        let parts = [sample.publicKey, Array(sample.signature[..<32]), Array(sample.signature[32...])]
        if ours, parts.contains(where: { $0.allSatisfy { $0 == 0 } || $0.allSatisfy { $0 == 0xFF } }) {
            tally.acceptedExtremes += 1
        }
    }
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

struct Ed25519Sample {
    var publicKey: [UInt8]
    var signature: [UInt8]
    var message: [UInt8]
}

/// Keys, signatures and adversarial cases from libsodium's group and scalar primitives, from a seed.
struct Ed25519CaseGenerator {
    var random: SplitMix64
    /// [j]T for the point T of order 8 whose y is 26e8…fc05: torsion[0] is the identity.
    let torsion: [[UInt8]]

    init(seed: UInt64) {
        random = SplitMix64(seed: seed)
        let order8: [UInt8] = [
            0x26, 0xE8, 0x95, 0x8F, 0xC2, 0xB2, 0x27, 0xB0, 0x45, 0xC3, 0xF4, 0x89, 0xF2, 0xEF, 0x98, 0xF0,
            0xD5, 0xDF, 0xAC, 0x05, 0xD3, 0xC6, 0x33, 0x39, 0xB1, 0x38, 0x02, 0x88, 0x6D, 0x53, 0xFC, 0x05,
        ]
        var table = [[1] + [UInt8](repeating: 0, count: 31), order8]
        for _ in 2..<8 { table.append(Self.add(table[table.count - 1], order8)) }
        precondition(Self.add(table[7], order8) == table[0], "T is not of order 8")
        torsion = table
    }

    /// Every encoding of a point of small order (14): the 8 canonical ones, the sign-flipped ("negative zero")
    /// encodings of the two whose x is 0 (y = 1 and y = p − 1; flipping the sign of any other gives another
    /// of the 8), and y + p for y = 0 and 1, with either sign bit.
    var smallOrderEncodings: [[UInt8]] {
        var encodings = Set(torsion.map { $0 })
        for point in torsion {
            var flipped = point
            flipped[31] ^= 0x80
            encodings.insert(flipped)
        }
        for y: UInt8 in [0, 1] {
            var high = [UInt8](repeating: 0xFF, count: 32)
            high[0] = 0xED &+ y
            high[31] = 0x7F
            encodings.insert(high)
            high[31] = 0xFF
            encodings.insert(high)
        }
        return encodings.sorted { $0.lexicographicallyPrecedes($1) }
    }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) } }

    /// A uniform scalar below L, nonzero.
    mutating func scalar() -> [UInt8] {
        while true {
            var wide = bytes(64)
            var reduced = [UInt8](repeating: 0, count: 32)
            crypto_core_ed25519_scalar_reduce(&reduced, &wide)
            if reduced.contains(where: { $0 != 0 }) { return reduced }
        }
    }

    static func base(_ scalar: [UInt8]) -> [UInt8] {
        var point = [UInt8](repeating: 0, count: 32)
        precondition(crypto_scalarmult_ed25519_base_noclamp(&point, scalar) == 0)
        return point
    }

    static func add(_ p: [UInt8], _ q: [UInt8]) -> [UInt8] {
        var sum = [UInt8](repeating: 0, count: 32)
        precondition(crypto_core_ed25519_add(&sum, p, q) == 0)
        return sum
    }

    /// k = SHA-512(R ‖ A ‖ M) mod L.
    static func challenge(_ r: [UInt8], _ a: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 64)
        let input = r + a + message
        crypto_hash_sha512(&digest, input, UInt64(input.count))
        var k = [UInt8](repeating: 0, count: 32)
        crypto_core_ed25519_scalar_reduce(&k, &digest)
        return k
    }

    static func mul(_ x: [UInt8], _ y: [UInt8]) -> [UInt8] {
        var z = [UInt8](repeating: 0, count: 32)
        crypto_core_ed25519_scalar_mul(&z, x, y)
        return z
    }

    static func sum(_ x: [UInt8], _ y: [UInt8]) -> [UInt8] {
        var z = [UInt8](repeating: 0, count: 32)
        crypto_core_ed25519_scalar_add(&z, x, y)
        return z
    }

    /// A signature `(R = [r]B, S = r + k·a)` with `k` over the given public key encoding (which need not be [a]B).
    mutating func sign(secret a: [UInt8], publicKey: [UInt8], message: [UInt8]) -> [UInt8] {
        let r = scalar()
        let big = Self.base(r)
        return big + Self.sum(r, Self.mul(Self.challenge(big, publicKey, message), a))
    }

    mutating func message() -> [UInt8] { bytes(Int(random.next() % 160)) }

    mutating func valid() -> (secret: [UInt8], sample: Ed25519Sample) {
        let a = scalar()
        let publicKey = Self.base(a)
        let message = message()
        return (a, Ed25519Sample(publicKey: publicKey, signature: sign(secret: a, publicKey: publicKey, message: message), message: message))
    }

    mutating func flip(_ bytes: inout [UInt8], in range: Range<Int>) {
        let bit = Int(random.next() % UInt64(range.count * 8))
        bytes[range.lowerBound + bit / 8] ^= UInt8(1) << (bit % 8)
    }

    /// `value + addend` over 32 little-endian bytes (carry out of the top byte dropped).
    static func add256(_ value: [UInt8], _ addend: [UInt8]) -> [UInt8] {
        var result = value
        var carry = 0
        for i in 0..<32 {
            let total = Int(value[i]) + Int(addend[i]) + carry
            result[i] = UInt8(total & 0xFF)
            carry = total >> 8
        }
        return result
    }

    static let groupOrder: [UInt8] = [
        0xED, 0xD3, 0xF5, 0x5C, 0x1A, 0x63, 0x12, 0x58, 0xD6, 0x9C, 0xF7, 0xA2, 0xDE, 0xF9, 0xDE, 0x14,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ]

    mutating func make(_ category: Ed25519DifferentialTests.Category) -> Ed25519Sample {
        switch category {
        case .valid:
            return valid().sample
        case .flipR:
            var sample = valid().sample
            flip(&sample.signature, in: 0..<32)
            return sample
        case .flipS:
            var sample = valid().sample
            flip(&sample.signature, in: 32..<64)
            return sample
        case .flipA:
            var sample = valid().sample
            flip(&sample.publicKey, in: 0..<32)
            return sample
        case .flipMessage:
            var sample = valid().sample
            if sample.message.isEmpty { sample.message = [0] } else { flip(&sample.message, in: 0..<sample.message.count) }
            return sample
        case .scalarTooLarge:
            var sample = valid().sample
            let s = Array(sample.signature[32...])
            var addend = Self.groupOrder
            if random.next() % 2 == 1 {
                // S + k·2^252, k in 1...15 (k = 1 is L − 27742317777372353535851937790883648493 away from S + L).
                addend = [UInt8](repeating: 0, count: 32)
                addend[31] = UInt8(1 + random.next() % 15) << 4
            } else if random.next() % 4 == 0 {
                // S + 2L, still below 2^256.
                addend = Self.add256(Self.groupOrder, Self.groupOrder)
            }
            sample.signature = Array(sample.signature[..<32]) + Self.add256(s, addend)
            return sample
        case .smallOrderKey:
            // (R = [r]B, S = r) under a small-order A verifies with a cofactorless verifier that does not refuse
            // small-order keys whenever [k]A = 0: when k is a multiple of 8, for every point of small order.
            let encodings = smallOrderEncodings
            let publicKey = encodings[Int(random.next() % UInt64(encodings.count))]
            let forge = random.next() % 4 != 0
            var message = message()
            let r = scalar()
            let big = Self.base(r)
            if forge {
                for attempt in 0..<256 {
                    if Self.challenge(big, publicKey, message)[0] & 7 == 0 { break }
                    message = Array("forgery \(attempt) ".utf8) + message
                }
            }
            return Ed25519Sample(publicKey: publicKey, signature: big + r, message: message)
        case .smallOrderR:
            // A' = [a]B + T, S = k·a: [S]B − [k]A' = −[k]T. R = −[k]T, any point of small order, verifies
            // with a cofactorless verifier that does not refuse small-order R (the identity under a plain key).
            let a = scalar()
            let plain = Self.base(a)
            let mixed = random.next() % 8 != 0
            let publicKey = mixed ? Self.add(plain, torsion[1]) : plain
            let encodings = smallOrderEncodings
            let big = mixed ? torsion[Int(random.next() % 8)] : torsion[0]
            var message = message()
            for attempt in 0..<256 {
                let k = Self.challenge(big, publicKey, message)
                let target = mixed ? torsion[(8 - Int(k[0] & 7)) % 8] : torsion[0]
                if target == big { break }
                message = Array("forgery \(attempt) ".utf8) + message
            }
            let k = Self.challenge(big, publicKey, message)
            var r = big
            if random.next() % 4 == 0 {
                // Another encoding of a small-order point: non-canonical or sign-flipped (never verifies, as the
                // recomputed R is canonical).
                r = encodings[Int(random.next() % UInt64(encodings.count))]
            }
            return Ed25519Sample(publicKey: publicKey, signature: r + Self.mul(k, a), message: message)
        case .mixedOrderKey:
            // A' = [a]B + [j]T, signed over A' (S = r + k·a): [S]B − [k]A' = R − [k·j]T: valid when k·j ≡ 0 mod 8.
            let a = scalar()
            let j = 1 + Int(random.next() % 7)
            let publicKey = Self.add(Self.base(a), torsion[j])
            let message = message()
            if random.next() % 4 == 0 {
                // Signed over the plain key: k differs, never valid.
                let plain = Self.base(a)
                return Ed25519Sample(publicKey: publicKey, signature: sign(secret: a, publicKey: plain, message: message), message: message)
            }
            return Ed25519Sample(publicKey: publicKey, signature: sign(secret: a, publicKey: publicKey, message: message), message: message)
        case .nonCanonical:
            // y + p for y in 0..<19 (some are points of the curve: y = 3, 4, 5, 6, 9, 10, 14, 15, 16, 18, of
            // mixed order), either sign bit, as A (over a valid signature's R and S) or as R.
            var high = [UInt8](repeating: 0xFF, count: 32)
            high[0] = 0xED &+ UInt8(random.next() % 19)
            high[31] = random.next() % 2 == 0 ? 0x7F : 0xFF
            var sample = valid().sample
            switch random.next() % 3 {
            case 0: sample.publicKey = high
            case 1: sample.signature = high + Array(sample.signature[32...])
            default:
                sample.publicKey = high
                sample.signature = high + Array(sample.signature[32...])
            }
            return sample
        case .extremes:
            let zero = [UInt8](repeating: 0, count: 32)
            let ones = [UInt8](repeating: 0xFF, count: 32)
            let valid = valid().sample
            let keys = [zero, ones, valid.publicKey]
            let halves = [zero, ones, Array(valid.signature[..<32]), Array(valid.signature[32...])]
            let message: [UInt8] = random.next() % 2 == 0 ? [] : valid.message
            return Ed25519Sample(
                publicKey: keys[Int(random.next() % 3)],
                signature: halves[Int(random.next() % 4)] + halves[Int(random.next() % 4)], message: message)
        }
    }
}
#endif
