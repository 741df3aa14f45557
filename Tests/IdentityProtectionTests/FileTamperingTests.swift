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
        try f.files.encryptFile(path: path, for: alice)
        encrypted = try #require(bytes(of: path))
    }

    /// Puts `damaged` in place and checks every reader rejects it with a typed error and leaves it as it is.
    private func expectRejected(_ damaged: [UInt8], codes: Set<Int>, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        writeRaw(damaged, to: path)
        let copy = f.path("copy.bin")
        let errors = [
            protectionError(sourceLocation: sourceLocation) { try f.files.readFile(atPath: path) },
            protectionError(sourceLocation: sourceLocation) { try f.files.decryptFile(path: path) },
            protectionError(sourceLocation: sourceLocation) { try f.files.decryptFile(path: path, toCopyPath: copy) },
        ]
        for error in errors {
            #expect(error.map { codes.contains($0.code) } == true, "\(String(describing: error)) \(comment?.rawValue ?? "")", sourceLocation: sourceLocation)
        }
        #expect(bytes(of: path) == damaged, sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: copy), sourceLocation: sourceLocation)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: f.root))?.count == 1, sourceLocation: sourceLocation)
    }

    private var records: [[UInt8]] {
        var result: [[UInt8]] = []
        var offset = headerLength
        while offset < encrypted.count {
            let end = min(encrypted.count, offset + Self.chunk + 16)
            result.append(Array(encrypted[offset..<end]))
            offset = end
        }
        return result
    }

    @Test("the layout is as documented: header, then 5 chunks of 16 + 16 bytes, the last 5 + 16")
    func layout() {
        #expect(records.count == 5)
        #expect(records.map(\.count) == [32, 32, 32, 32, 21])
    }

    @Test("a chunk reordered: 102")
    func reordered() {
        var chunks = records
        chunks.swapAt(1, 2)
        expectRejected(Array(encrypted[..<headerLength]) + chunks.joined(), codes: [102])
    }

    @Test("a chunk dropped (first, middle, last), duplicated, or appended: 100 or 102", arguments: [0, 2, 4])
    func dropped(index: Int) {
        var chunks = records
        chunks.remove(at: index)
        expectRejected(Array(encrypted[..<headerLength]) + chunks.joined(), codes: [100, 102])
        var duplicated = records
        duplicated.insert(records[index], at: index)
        expectRejected(Array(encrypted[..<headerLength]) + duplicated.joined(), codes: [100, 102])
    }

    @Test("truncated at every length: 100 or 102, never plaintext")
    func truncated() {
        for length in 1..<encrypted.count {
            let prefix = Array(encrypted[..<length])
            // A prefix of the magic is not recognised as encrypted by isFileEncrypted, but readers must still
            // not hand it out as if it were the plaintext of this file.
            if length < 8 { continue }
            expectRejected(prefix, codes: [100, 102], "length \(length)")
        }
        expectRejected(encrypted + [0], codes: [100, 102])
    }

    @Test("every bit of the header and a bit in every chunk flipped: typed errors")
    func flipped() {
        for index in 8..<encrypted.count {
            let bits = index < headerLength ? Array(0..<8) : [index % 8]
            for bit in bits {
                var damaged = encrypted
                damaged[index] ^= 1 << bit
                expectRejected(damaged, codes: [100, 101, 102, 103, 104], "byte \(index) bit \(bit)")
            }
        }
    }

    @Test("unknown version: 101; absurd chunk size: 100")
    func versionAndChunkSize() {
        var damaged = encrypted
        damaged[8] = 9
        expectRejected(damaged, codes: [101])
        var chunkSize = encrypted
        for i in headerLength - 4..<headerLength { chunkSize[i] = 0xFF }
        expectRejected(chunkSize, codes: [100])
        for i in headerLength - 4..<headerLength { chunkSize[i] = 0 }
        expectRejected(chunkSize, codes: [100])
    }
}
