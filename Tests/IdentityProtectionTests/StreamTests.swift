import Foundation
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("Streamed protection: AsyncSequence and file-to-file, bounded memory")
struct StreamTests {
    static func payload(_ count: Int, seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// `bytes` cut into pieces of pseudo-random sizes (0 included).
    static func pieces(_ bytes: [UInt8], seed: UInt64, maximum: Int) -> [[UInt8]] {
        var random = SplitMix64(seed: seed)
        var result: [[UInt8]] = []
        var offset = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, Int(random.next() % UInt64(maximum + 1)))
            result.append(Array(bytes[offset..<offset + count]))
            offset += count
        }
        return result
    }

    @Test("round trip for sizes around chunk boundaries, any piece sizes, managed and unmanaged",
          arguments: [0, 1, 15, 16, 17, 64, 1000], [alice, carol])
    func roundTrip(size: Int, owner: Identity) async throws {
        let f = try Fixture()
        let original = Self.payload(size, seed: UInt64(size))
        let sealed = try await f.data.protect(Self.pieces(original, seed: 1, maximum: 40).async, identity: owner, chunkSize: 16).collect()
        if owner == alice {
            let chunks = max(1, (size + 15) / 16)
            #expect(sealed.count == 8 + 4 + alice.name.utf8.count + 16 + 32 + 4 + size + 16 * chunks)
        } else {
            #expect(sealed == [0x89, 0x49, 0x44, 0x50, 0x53, 0x0D, 0x0A, 0x1A, 1, 0, 0, UInt8(carol.name.utf8.count)] + Array(carol.name.utf8) + original)
        }
        for seed in 0..<3 as Range<UInt64> {
            let opened = try await IdentityContext.withThreadIdentity(owner) {
                try await f.data.unprotect(Self.pieces(sealed, seed: seed, maximum: 50).async).collect()
            }
            #expect(opened == original)
        }
        // Data instead of arrays, one piece.
        let fromData = try await f.data.unprotect([Data(sealed)].async).collect()
        #expect(fromData == original)
    }

    @Test("input that is not a stream envelope passes through unchanged")
    func passThrough() async throws {
        let f = try Fixture()
        for input in [[], [0x89], [0x89, 0x49], Array("hello".utf8)] as [[UInt8]] {
            #expect(try await f.data.unprotect(input.map { [$0] }.async).collect() == input)
        }
    }

    @Test("tampered, reordered, truncated or extended streams: typed errors, never unauthenticated bytes")
    func tampering() async throws {
        let f = try Fixture()
        let original = Self.payload(100, seed: 9)
        let sealed = try await f.data.protect([original].async, identity: alice, chunkSize: 16).collect()
        let headerLength = sealed.count - 100 - 16 * 7
        func expectFailure(_ damaged: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) async {
            var yielded: [UInt8] = []
            do {
                for try await piece in f.data.unprotect([damaged].async) { yielded += piece }
                Issue.record("no error", sourceLocation: sourceLocation)
            } catch let error as ProtectionError {
                #expect([100, 101, 102, 103, 104].contains(error.code), sourceLocation: sourceLocation)
            } catch {
                Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
            }
            // Whatever was yielded is an authenticated prefix of the original.
            #expect(Array(original.prefix(yielded.count)) == yielded, sourceLocation: sourceLocation)
        }
        for length in 8..<sealed.count { await expectFailure(Array(sealed[..<length])) }
        await expectFailure(sealed + [0])
        for index in stride(from: 8, to: sealed.count, by: 3) {
            var damaged = sealed
            damaged[index] ^= 0x04
            await expectFailure(damaged)
        }
        var swapped = sealed
        let record = 32
        swapped.replaceSubrange(headerLength..<headerLength + 2 * record,
                                with: Array(sealed[headerLength + record..<headerLength + 2 * record]) + Array(sealed[headerLength..<headerLength + record]))
        await expectFailure(swapped)
    }

    @Test("file to file: protect, unprotect, atomic; memory stays flat for a large payload")
    func fileToFile() throws {
        let f = try Fixture()
        let source = f.path("big.bin")
        let sealed = f.path("big.sealed")
        let opened = f.path("big.opened")
        let original = Self.payload(3 << 20 + 77, seed: 3)
        writeRaw(original, to: source)
        try f.data.protect(fileAtPath: source, toPath: sealed, identity: bob)
        #expect(Data(bytes(of: sealed)!).range(of: Data(original[1000..<1100])) == nil)
        try IdentityContext.withThreadIdentity(bob) { try f.data.unprotect(fileAtPath: sealed, toPath: opened) }
        #expect(bytes(of: opened) == original)
        // A damaged stream leaves no destination behind.
        var damaged = bytes(of: sealed)!
        damaged[damaged.count - 5] ^= 1
        writeRaw(damaged, to: sealed)
        try FileManager.default.removeItem(atPath: opened)
        #expect(protectionError { try f.data.unprotect(fileAtPath: sealed, toPath: opened) }?.code == 102)
        #expect(!FileManager.default.fileExists(atPath: opened))
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root).sorted() == ["big.bin", "big.sealed"])
        #expect(protectionError { try f.data.protect(fileAtPath: f.path("missing"), toPath: sealed) }?.code == 105)
        #expect(protectionError { try f.data.protect(fileAtPath: source, toPath: sealed, chunkSize: 0) }?.code == 100)
    }
}
