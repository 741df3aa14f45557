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
        let sealed = try await f.data.protect(Self.pieces(original, seed: 1, maximum: 40).async, owner: owner, chunkSize: 16).collect()
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
        for input in [[], [0x89, 0x50], [0x89, 0x49, 0x44, 0x50, 0x58], Array("hello".utf8)] as [[UInt8]] {
            #expect(try await f.data.unprotect(input.map { [$0] }.async).collect() == input)
        }
    }

    /// What unprotecting some input gave: its plaintext, or the code of the error.
    enum Outcome: Equatable {
        case success([UInt8])
        case failure(Int)
    }

    /// The outcome of unprotecting `pieces` as `reader`.
    static func outcome(_ f: Fixture, _ pieces: [[UInt8]], as reader: Identity?) async -> Outcome {
        await IdentityContext.withThreadIdentity(reader) {
            do {
                return .success(try await f.data.unprotect(pieces.async).collect())
            } catch let error as ProtectionError {
                return .failure(error.code)
            } catch {
                return .failure(-1)
            }
        }
    }

    @Test("how the input is split never changes the outcome: empty pieces anywhere, one byte at a time, random splits")
    func splitsNeverMatter() async throws {
        let f = try Fixture(isolated: true)
        let plaintext = Self.payload(100, seed: 7)
        let managed = try await f.data.protect([plaintext].async, owner: alice, chunkSize: 16).collect()
        let clear = try await f.data.protect([plaintext].async, owner: carol, chunkSize: 16).collect()
        let envelope = [UInt8](try f.data.protect(Data(plaintext), owner: alice))
        let inputs: [(String, [UInt8])] = [
            ("managed stream", managed), ("clear stream", clear), ("plaintext", plaintext), ("empty", []),
            ("a data envelope", envelope), ("cut inside the magic", Array(managed.prefix(5))),
            ("cut inside the header", Array(managed.prefix(20))), ("cut inside a record", Array(managed.dropLast(3))),
            ("the magic alone", Array(managed.prefix(8))),
        ]
        for (name, input) in inputs {
            for reader in [alice, mallory, nil] as [Identity?] {
                let whole = await Self.outcome(f, [input], as: reader)
                var splits: [[[UInt8]]] = [
                    [[], input], [input, []], [[], [], input, []],
                    input.map { [$0] }, input.flatMap { [[], [$0]] } + [[]],
                ]
                for seed in 0..<8 as Range<UInt64> { splits.append([[]] + Self.pieces(input, seed: seed, maximum: 9)) }
                for split in splits {
                    let outcome = await Self.outcome(f, split, as: reader)
                    #expect(outcome == whole, "\(name) as \(String(describing: reader)), pieces \(split.map(\.count))")
                }
            }
        }
        // What one piece gives, for the record: the owner reads, others are refused; a cut stream and another
        // format are errors; plaintext and empty input pass through.
        #expect(await Self.outcome(f, [managed], as: alice) == .success(plaintext))
        #expect(await Self.outcome(f, [managed], as: mallory) == .failure(108))
        #expect(await Self.outcome(f, [managed], as: Identity?.none) == .failure(108))
        #expect(await Self.outcome(f, [Array(managed.prefix(5))], as: alice) == .failure(100))
        #expect(await Self.outcome(f, [Array(managed.prefix(20))], as: alice) == .failure(100))
        #expect(await Self.outcome(f, [envelope], as: alice) == .failure(100))
        #expect(await Self.outcome(f, [plaintext], as: Identity?.none) == .success(plaintext))
        #expect(await Self.outcome(f, [[]], as: Identity?.none) == .success([]))
        // The one-shot unprotect refuses a stream, too, rather than hand its bytes out as plaintext.
        #expect(throws: ProtectionError.self) { try f.data.unprotect(Data(managed)) }
        #expect(throws: ProtectionError.self) { try f.data.unprotect(Data(clear)) }
    }

    @Test("tampered, reordered, truncated or extended streams: typed errors, never unauthenticated bytes")
    func tampering() async throws {
        let f = try Fixture()
        let original = Self.payload(100, seed: 9)
        let sealed = try await f.data.protect([original].async, owner: alice, chunkSize: 16).collect()
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
        try f.files.protect(atPath: source, toPath: sealed, owner: bob)
        #expect(Data(bytes(of: sealed)!).range(of: Data(original[1000..<1100])) == nil)
        try IdentityContext.withThreadIdentity(bob) { try f.files.unprotect(atPath: sealed, toPath: opened) }
        #expect(bytes(of: opened) == original)
        // A damaged stream leaves no destination behind.
        var damaged = bytes(of: sealed)!
        damaged[damaged.count - 5] ^= 1
        writeRaw(damaged, to: sealed)
        try FileManager.default.removeItem(atPath: opened)
        #expect(protectionError { try f.files.unprotect(atPath: sealed, toPath: opened) }?.code == 102)
        #expect(!FileManager.default.fileExists(atPath: opened))
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root).sorted() == ["big.bin", "big.sealed"])
        #expect(protectionError { try f.files.protect(atPath: f.path("missing"), toPath: sealed) }?.code == 105)
        #expect(protectionError { try f.files.protect(atPath: source, toPath: sealed, chunkSize: 0) }?.code == 100)
    }
}
