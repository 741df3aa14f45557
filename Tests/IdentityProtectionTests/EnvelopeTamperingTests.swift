import Foundation
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

/// Layout of a v1 encrypted envelope for `owner` (see article DataAndFileProtection).
struct EnvelopeLayout {
    let ownerLength: Int
    var version: Int { 8 }
    var flags: Int { 9 }
    var ownerLengthField: Range<Int> { 10..<12 }
    var owner: Range<Int> { 12..<12 + ownerLength }
    var keyID: Range<Int> { owner.upperBound..<owner.upperBound + 16 }
    var nonce: Range<Int> { keyID.upperBound..<keyID.upperBound + 12 }
    var bodyLength: Range<Int> { nonce.upperBound..<nonce.upperBound + 8 }
    var body: Int { bodyLength.upperBound }
}

@Suite("DataProtectionManager: bad input")
struct EnvelopeTamperingTests {
    let f: Fixture
    let plaintext = Data("the merger closes on Friday".utf8)
    let sealed: [UInt8]
    let layout = EnvelopeLayout(ownerLength: alice.name.utf8.count)

    init() throws {
        f = try Fixture()
        sealed = Array(try f.data.protect(plaintext, owner: alice))
    }

    /// Unprotecting `bytes` must throw a ProtectionError; returns it.
    private func rejection(_ bytes: [UInt8]) -> ProtectionError? {
        do {
            let result = try f.data.unprotect(Data(bytes))
            Issue.record("accepted a damaged envelope of \(bytes.count) bytes, returned \(result.count) bytes")
            return nil
        } catch {
            return error
        }
    }

    @Test("the layout the tests assume matches the envelope")
    func layoutMatches() {
        #expect(sealed.count == layout.body + plaintext.count + 16)
        #expect(Array(sealed[0..<8]) == [0x89, 0x49, 0x44, 0x50, 0x44, 0x0D, 0x0A, 0x1A])
        #expect(sealed[layout.version] == 1 && sealed[layout.flags] == 1)
        #expect(Array(sealed[layout.owner]) == Array(alice.name.utf8))
    }

    @Test("truncated at every length: 100, never plaintext")
    func truncatedEverywhere() throws {
        for length in 1..<sealed.count {
            let error = rejection(Array(sealed[..<length]))
            #expect(error?.code == 100, "length \(length): \(String(describing: error))")
            #expect(protectionError { try f.data.protectionInfo(Data(sealed[..<length])) }?.code == 100)
        }
        // The empty input is unprotected (empty) data.
        #expect(try f.data.unprotect(Data()) == Data())
    }

    @Test("trailing bytes: 100")
    func trailing() {
        #expect(rejection(sealed + [0])?.code == 100)
    }

    @Test("every bit of every field after the magic flipped: a typed error, never plaintext")
    func flippedBits() {
        var codes: [String: Set<Int>] = [:]
        for index in 8..<sealed.count {
            for bit in 0..<8 {
                var damaged = sealed
                damaged[index] ^= 1 << bit
                guard let error = rejection(damaged) else { continue }
                let field: String
                switch index {
                case layout.version: field = "version"
                case layout.flags: field = "flags"
                case layout.ownerLengthField: field = "owner length"
                case layout.owner: field = "owner"
                case layout.keyID: field = "key id"
                case layout.nonce: field = "nonce"
                case layout.bodyLength: field = "body length"
                case layout.body..<sealed.count - 16: field = "ciphertext"
                default: field = "tag"
                }
                codes[field, default: []].insert(error.code)
            }
        }
        #expect(codes["version"] == [101])
        #expect(codes["flags"] == [100])
        #expect(codes["owner length"]!.isSubset(of: [100, 104]))
        #expect(codes["owner"]!.isSubset(of: [102, 103, 104]))
        #expect(codes["key id"] == [103])
        #expect(codes["nonce"] == [102])
        #expect(codes["body length"] == [100])
        #expect(codes["ciphertext"] == [102])
        #expect(codes["tag"] == [102])
    }

    @Test("a damaged magic makes it unprotected data: returned unchanged, never decrypted")
    func damagedMagic() throws {
        for index in 0..<8 {
            var damaged = sealed
            damaged[index] ^= 0x01
            #expect(try f.data.unprotect(Data(damaged)) == Data(damaged))
            #expect(try f.data.protectionInfo(Data(damaged)) == nil)
        }
    }

    @Test("a case-flipped owner (same keys) fails authentication: the header is associated data")
    func ownerCaseFlip() {
        var damaged = sealed
        damaged[layout.owner.lowerBound] ^= 0x20   // "a" -> "A"
        #expect(rejection(damaged) == .authenticationFailed)
    }

    @Test("unknown versions: 101", arguments: [0, 2, 3, 127, 255])
    func unknownVersion(version: Int) {
        var damaged = sealed
        damaged[layout.version] = UInt8(version)
        #expect(rejection(damaged) == .unsupportedVersion(UInt8(version)))
        #expect(protectionError { try f.data.protectionInfo(Data(damaged)) } == .unsupportedVersion(UInt8(version)))
    }

    /// An envelope with an arbitrary owner field (length and bytes), otherwise a valid clear envelope.
    private func clearEnvelope(ownerLength: Int, owner: [UInt8], body: [UInt8] = [1, 2, 3]) -> [UInt8] {
        var bytes: [UInt8] = [0x89, 0x49, 0x44, 0x50, 0x44, 0x0D, 0x0A, 0x1A, 1, 0]
        bytes += [UInt8(ownerLength >> 8), UInt8(ownerLength & 0xFF)] + owner
        bytes += [0, 0, 0, 0, 0, 0, 0, UInt8(body.count)] + body
        return bytes
    }

    @Test("owner field: invalid UTF-8, absurd length, control characters: 104", arguments: [
        [0xFF, 0xFE],
        [0x61, 0xC3],                 // truncated sequence
        [0xED, 0xA0, 0x80],           // encoded surrogate
        [0xC0, 0xAF],                 // overlong
        [0x61, 0x00, 0x62],           // NUL
        [0x20, 0x61],                 // surrounding white space
    ] as [[UInt8]])
    func badOwner(owner: [UInt8]) {
        let envelope = clearEnvelope(ownerLength: owner.count, owner: owner)
        #expect(rejection(envelope)?.code == 104)
        #expect(protectionError { try f.data.protectionInfo(Data(envelope)) }?.code == 104)
    }

    @Test("owner length beyond 1,024 bytes: 104; beyond the data: 100")
    func absurdOwnerLength() {
        #expect(rejection(clearEnvelope(ownerLength: 0xFFFF, owner: []))?.code == 104)
        #expect(rejection(clearEnvelope(ownerLength: 1025, owner: [UInt8](repeating: 0x61, count: 1025)))?.code == 104)
        #expect(rejection(clearEnvelope(ownerLength: 900, owner: [0x61]))?.code == 100)
        // 1,024 bytes is the limit and fine.
        let longest = clearEnvelope(ownerLength: 1024, owner: [UInt8](repeating: 0x61, count: 1024))
        #expect((try? f.data.unprotect(Data(longest))) == Data([1, 2, 3]))
    }

    @Test("an encrypted envelope naming the unmanaged owner: 104")
    func encryptedUnmanaged() {
        var bytes: [UInt8] = [0x89, 0x49, 0x44, 0x50, 0x44, 0x0D, 0x0A, 0x1A, 1, 1, 0, 0]
        bytes += [UInt8](repeating: 0, count: 16 + 12) + [0, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 16)
        #expect(rejection(bytes)?.code == 104)
    }

    @Test("protecting for an owner longer than the format allows: 104")
    func tooLongOwner() {
        let huge = Identity(String(repeating: "a", count: 2000))
        #expect(protectionError { try f.data.protect(Data("x".utf8), owner: huge) }?.code == 104)
    }

    @Test("randomized: 100,000 mutated envelopes, none accepted")
    func randomized() throws {
        var generator = SplitMix64(seed: 0x1D_E7_17_7E)
        let count = longTests ? 1_000_000 : 100_000
        var envelopes: [[UInt8]] = []
        for size in [0, 1, 5, 16, 33] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            envelopes.append(Array(try f.data.protect(Data(payload), owner: [alice, bob][size % 2])))
        }
        var outcomes: [Int: Int] = [:]
        var accepted = 0
        for _ in 0..<count {
            let original = envelopes[Int(generator.next() % UInt64(envelopes.count))]
            let mutated = mutate(original, &generator)
            if mutated == original { continue }
            do {
                let result = try f.data.unprotect(Data(mutated))
                // Only a damaged magic may pass, as unprotected data returned unchanged.
                if result != Data(mutated) || mutated.starts(with: original.prefix(8)) { accepted += 1 }
                outcomes[0, default: 0] += 1
            } catch {
                outcomes[error.code, default: 0] += 1
            }
        }
        #expect(accepted == 0)
        #expect(outcomes.values.reduce(0, +) >= count * 99 / 100)
    }

    private func mutate(_ bytes: [UInt8], _ generator: inout SplitMix64) -> [UInt8] {
        var result = bytes
        switch generator.next() % 6 {
        case 0, 1:
            for _ in 0...(generator.next() % 3) {
                result[Int(generator.next() % UInt64(max(result.count, 1)))] ^= UInt8(1 << (generator.next() % 8))
            }
        case 2:
            result[Int(generator.next() % UInt64(max(result.count, 1)))] = UInt8(truncatingIfNeeded: generator.next())
        case 3:
            result.removeSubrange(Int(generator.next() % UInt64(max(result.count, 1)))...)
        case 4:
            result.insert(UInt8(truncatingIfNeeded: generator.next()), at: Int(generator.next() % UInt64(max(result.count + 1, 1))))
        default:
            let index = Int(generator.next() % UInt64(max(result.count, 1)))
            result.remove(at: index)
        }
        return result
    }
}

