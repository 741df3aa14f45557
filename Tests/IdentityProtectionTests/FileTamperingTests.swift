import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("FileProtectionManager: damaged encrypted files")
struct FileTamperingTests {
    static let chunk = 16
    let f: Fixture
    let path: String
    let original: [UInt8]
    let encrypted: [UInt8]
    var headerLength: Int { 8 + 4 + alice.name.utf8.count + 16 + 32 + 4 }

    init() throws {
        f = try Fixture(chunkSize: Self.chunk)
        path = f.path("doc.bin")
        original = (0..<(Self.chunk * 4 + 5)).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ 11) }
        writeRaw(original, to: path)
        try f.files.encryptFile(atPath: path, owner: alice)
        encrypted = try #require(bytes(of: path))
    }

    /// Puts `damaged` in place and checks every reader rejects it with a typed error and leaves it as it is.
    private func expectRejected(_ damaged: [UInt8], codes: Set<Int>, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        writeRaw(damaged, to: path)
        let copy = f.path("copy.bin")
        let errors = [
            protectionError(sourceLocation: sourceLocation) { try f.files.readFile(atPath: path) },
            protectionError(sourceLocation: sourceLocation) { try f.files.decryptFile(atPath: path) },
            protectionError(sourceLocation: sourceLocation) { try f.files.decryptFile(atPath: path, toPath: copy) },
        ]
        for error in errors {
            #expect(error.map { codes.contains($0.code) } == true, "\(String(describing: error)) \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        }
        #expect(bytes(of: path) == damaged, sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: copy), sourceLocation: sourceLocation)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: f.root))?.count == 1, sourceLocation: sourceLocation)
    }

    var slotLength: Int { Self.chunk + 40 }
    var dataStart: Int { headerLength + 96 }

    /// The five chunk records (slot 0 of each chunk; the other slots are holes).
    private var records: [[UInt8]] {
        (0..<5).map { index in
            let start = dataStart + 2 * index * slotLength
            return Array(encrypted[start..<min(encrypted.count, start + slotLength)])
        }
    }

    /// `records` laid out again in slot 0 of consecutive chunks.
    private func file(_ records: [[UInt8]]) -> [UInt8] {
        var bytes = Array(encrypted[..<dataStart])
        for (index, record) in records.enumerated() {
            bytes += record
            if index < records.count - 1 { bytes += [UInt8](repeating: 0, count: 2 * slotLength - record.count) }
        }
        return bytes
    }

    @Test("the layout is as documented: header, two size slots, then 5 chunks in slot 0 (40 + 16 bytes, the last 40 + 5)")
    func layout() {
        #expect(encrypted.count == dataStart + 4 * 2 * slotLength + 45)
        #expect(records.map(\.count) == [56, 56, 56, 56, 45])
        #expect(file(records) == encrypted)
        // Size slot 0 holds generation 1; size slot 1 and every second chunk slot are empty (zeros).
        #expect(Array(encrypted[headerLength..<headerLength + 8]) == [0, 0, 0, 0, 0, 0, 0, 1])
        #expect(encrypted[headerLength + 48..<dataStart].allSatisfy { $0 == 0 })
        #expect(encrypted[dataStart + slotLength..<dataStart + 2 * slotLength].allSatisfy { $0 == 0 })
    }

    @Test("a chunk reordered, or moved to another position: 102")
    func reordered() {
        var chunks = records
        chunks.swapAt(1, 2)
        expectRejected(file(chunks), codes: [102])
        var moved = records
        moved[3] = moved[0]
        expectRejected(file(moved), codes: [102])
        // A record moved into the chunk's other slot with a higher generation still names its index: the
        // reader takes the valid one.
    }

    @Test("a chunk from another file with the same owner and content: 102")
    func foreignChunk() throws {
        let other = f.path("other.bin")
        writeRaw(original, to: other)
        try f.files.encryptFile(atPath: other, owner: alice)
        let otherBytes = try #require(bytes(of: other))
        try FileManager.default.removeItem(atPath: other)
        var chunks = records
        chunks[2] = Array(otherBytes[(dataStart + 4 * slotLength)..<(dataStart + 5 * slotLength)])
        expectRejected(file(chunks), codes: [102])
    }

    @Test("a chunk dropped (first, middle, last) or duplicated: 100 or 102", arguments: [0, 2, 4])
    func dropped(index: Int) {
        var chunks = records
        chunks.remove(at: index)
        expectRejected(file(chunks), codes: [100, 102])
        var duplicated = records
        duplicated.insert(records[index], at: index)
        guard index < 4 else {
            // The last record repeated after the content is past the authenticated size: ignored.
            duplicated[4] += [UInt8](repeating: 0, count: slotLength - 45)
            writeRaw(file(duplicated), to: path)
            #expect((try? f.files.readFile(atPath: path)).map(Array.init) == original)
            return
        }
        expectRejected(file(duplicated), codes: [100, 102])
    }

    @Test("truncated at every length: 100 or 102, never plaintext; bytes appended after the content are ignored")
    func truncated() throws {
        for length in 1..<encrypted.count {
            let prefix = Array(encrypted[..<length])
            // A prefix of the magic is not recognised as encrypted by isFileEncrypted, but readers must still
            // not hand it out as if it were the plaintext of this file.
            if length < 8 { continue }
            expectRejected(prefix, codes: [100, 102], "length \(length)")
        }
        writeRaw(encrypted + [0, 0, 0, 7], to: path)
        #expect(Array(try f.files.readFile(atPath: path)) == original)
    }

    @Test("every bit of the header, the size record and a bit in every chunk byte flipped: typed errors")
    func flipped() {
        var positions: [Int] = Array(8..<headerLength + 48)
        for index in 0..<5 {
            let start = dataStart + 2 * index * slotLength
            positions += Array(start..<min(encrypted.count, start + slotLength))
        }
        for index in positions {
            let bits = index < headerLength ? Array(0..<8) : [index % 8]
            for bit in bits {
                var damaged = encrypted
                damaged[index] ^= 1 << bit
                expectRejected(damaged, codes: [100, 101, 102, 103, 104], "byte \(index) bit \(bit)")
            }
        }
    }

    @Test("a damaged record in a chunk's other slot is ignored: the valid record is read")
    func damagedOtherSlot() throws {
        var damaged = encrypted
        let other = dataStart + slotLength
        for i in other..<other + slotLength { damaged[i] = UInt8(truncatingIfNeeded: i &* 31) }
        writeRaw(damaged, to: path)
        #expect(Array(try f.files.readFile(atPath: path)) == original)
    }

    @Test("unknown version: 101; relabeled version: 100/102; absurd chunk size: 100")
    func versionAndChunkSize() {
        var damaged = encrypted
        damaged[8] = 9
        expectRejected(damaged, codes: [101])
        damaged[8] = 0
        expectRejected(damaged, codes: [101])
        // Version 1 is still read (LegacyFormatTests): a version 2 file relabeled 1 does not authenticate.
        var oldVersion = encrypted
        oldVersion[8] = 1
        expectRejected(oldVersion, codes: [100, 102])
        var chunkSize = encrypted
        for i in headerLength - 4..<headerLength { chunkSize[i] = 0xFF }
        expectRejected(chunkSize, codes: [100])
        for i in headerLength - 4..<headerLength { chunkSize[i] = 0 }
        expectRejected(chunkSize, codes: [100])
    }
}
