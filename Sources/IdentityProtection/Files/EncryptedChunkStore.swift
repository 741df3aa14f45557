#if canImport(Glibc)
import Glibc
import CIdentityCrypto
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Random access to the content of an encrypted file (format version 2, see ``EncryptedFileFormat``):
/// authenticated chunk reads, and writes that put every rewritten chunk into its other slot with the next
/// generation and a fresh nonce. Files of version 1 are read through the same calls and never written:
/// opening one authenticates its final chunk, which proves the length; a write throws ``ProtectionError/unsupportedVersion(_:)`` (101).
///
/// Write order, which gives the crash guarantees in <doc:DataAndFileProtection>: chunk records first, then the size
/// record when the length grows; the size record first, then `ftruncate` when it shrinks. A crash (SIGKILL)
/// at any point leaves every chunk readable at its previous or its new content, and the length at its
/// previous or its new value; a record torn mid-write fails authentication and the reader falls back to the
/// chunk's other slot.
///
/// Not thread-safe: ``ProtectedFile`` serializes access under its lock.
struct EncryptedChunkStore: Sendable {
    /// The generations found in a chunk's two slots and the slot holding the record in use.
    struct SlotState: Sendable {
        var generation0: UInt64
        var generation1: UInt64
        var valid: Int?

        /// The generation of the next record: one more than the record in use (the other slot is about to be
        /// overwritten, so its generation, unauthenticated, does not count); 1 when no record is in use. 0: the
        /// in-use generation is exhausted.
        var next: UInt64 {
            guard let valid else { return 1 }
            return (valid == 0 ? generation0 : generation1) &+ 1
        }

        /// The slot the next record goes into: never the one in use.
        var target: Int {
            if let valid { return 1 - valid }
            return generation0 <= generation1 ? 0 : 1
        }

        mutating func wrote(_ generation: UInt64, into slot: Int) {
            if slot == 0 { generation0 = generation } else { generation1 = generation }
            valid = slot
        }
    }

    let fd: Int32
    let path: String
    let header: EncryptedFileFormat.Header
    let fileKey: [UInt8]
    let writable: Bool
    /// The authenticated content length.
    private(set) var length: UInt64
    private var sizeSlots: SlotState
    private var slots: [UInt64: SlotState] = [:]
    private var cachedIndex: UInt64?
    private var cachedPlaintext: [UInt8] = []
    /// Whether slots past the last chunk are known to be absent (so a new chunk may start at generation 1).
    private var tailIsClean: Bool
    /// Version 1 files: how many chunk records the file holds (at least one; the last is the final one).
    private var legacyRecordCount: UInt64 = 0
    /// Where the disk space reserved for new chunks ends (Linux); `Int64.max` once the file system refused.
    private var preallocatedEnd: Int64 = 0
    /// How many chunks ahead a growing file reserves space for.
    static let preallocationChunks: UInt64 = 16

    var chunkSize: Int { header.chunkSize }

    /// Writes a new, empty encrypted file into `fd` (which must be empty).
    init(creating fd: Int32, path: String, header: EncryptedFileFormat.Header, key: ProtectionKey) throws(ProtectionError) {
        self.fd = fd
        self.path = path
        self.header = header
        self.fileKey = try EncryptedFileFormat.fileKey(key, header: header)
        self.writable = true
        self.length = 0
        self.sizeSlots = SlotState(generation0: 1, generation1: 0, valid: 0)
        self.tailIsClean = true
        try POSIX.pwriteAll(fd, header.bytes, at: 0, path: path)
        try EncryptedFileFormat.writeSizeRecord(0, generation: 1, slot: 0, fd: fd, path: path, header: header, fileKey: fileKey)
    }

    /// Opens an existing encrypted file whose header was read from `fd`: reads the size record.
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) no size record (the file is cut inside it) or an impossible length; ``ProtectionError/authenticationFailed`` (102) neither size
    ///   record authenticates.
    init(opening fd: Int32, path: String, header: EncryptedFileFormat.Header, key: ProtectionKey, writable: Bool) throws(ProtectionError) {
        self.fd = fd
        self.path = path
        self.header = header
        self.writable = writable
        self.tailIsClean = false
        let fileKey = try EncryptedFileFormat.fileKey(key, header: header)
        self.fileKey = fileKey
        if header.isLegacy {
            self.sizeSlots = SlotState(generation0: 0, generation1: 0, valid: nil)
            self.length = 0
            try openLegacy()
            return
        }
        let area = try POSIX.preadUpTo(fd, upTo: 2 * EncryptedFileFormat.sizeSlotLength, at: header.sizeSlotOffset(0), path: path)
        var best: (slot: Int, generation: UInt64, length: UInt64)?
        var lastError: ProtectionError?
        var generations: [UInt64] = [0, 0]
        try withRawBytes(of: area) { (raw) throws(ProtectionError) in
            for slot in 0..<2 {
                let start = min(raw.count, slot * EncryptedFileFormat.sizeSlotLength)
                let end = min(raw.count, start + EncryptedFileFormat.sizeSlotLength)
                let bytes = UnsafeRawBufferPointer(rebasing: raw[start..<end])
                generations[slot] = EncryptedFileFormat.generation(bytes)
                guard generations[slot] != 0 else { continue }
                do throws(ProtectionError) {
                    let (generation, plaintext) = try EncryptedFileFormat.openRecord(
                        bytes, index: EncryptedFileFormat.sizeRecordIndex, header: header, fileKey: fileKey, maximumLength: 8)
                    guard plaintext.count == 8 else {
                        throw ProtectionError.invalidEnvelope(reason: "size record holds \(plaintext.count) bytes, not 8")
                    }
                    let value = plaintext.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                    if best.map({ generation > $0.generation }) ?? true { best = (slot, generation, value) }
                } catch {
                    lastError = error
                }
            }
        }
        guard let best else {
            throw lastError ?? .invalidEnvelope(reason: "truncated: no size record")
        }
        guard best.length <= header.maximumContentLength else {
            throw .invalidEnvelope(reason: "size record claims \(best.length) bytes, beyond the format's limit")
        }
        self.length = best.length
        self.sizeSlots = SlotState(generation0: generations[0], generation1: generations[1], valid: best.slot)
    }

    /// Version 1: counts the chunk records from the file's size and authenticates the last one as the final
    /// chunk, which proves the content length (a file cut at a record boundary fails here, as its new last
    /// record was not sealed as final).
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) the file is cut inside the header or a tag; ``ProtectionError/authenticationFailed`` (102) the last record is not the final chunk.
    private mutating func openLegacy() throws(ProtectionError) {
        let size = Int64(try POSIX.fstatFD(fd, path: path).st_size)
        let body = size - Int64(header.bytes.count)
        guard body > 0 else { throw .invalidEnvelope(reason: "truncated: chunk 0 missing") }
        let recordLength = header.legacyRecordLength
        let count = UInt64((body + recordLength - 1) / recordLength)
        let last = count - 1
        let offset = header.legacyRecordOffset(last)
        let record = try POSIX.preadUpTo(fd, upTo: Int(size - offset), at: offset, path: path)
        let plaintext = try withRawBytes(of: record) { (raw) throws(ProtectionError) in
            try EncryptedFileFormat.openLegacyRecord(raw, index: last, final: true, header: header, fileKey: fileKey)
        }
        legacyRecordCount = count
        length = last * UInt64(chunkSize) + UInt64(plaintext.count)
        cachedIndex = last
        cachedPlaintext = plaintext
    }

    /// Version 1: chunk `index` (< the record count), authenticated at its index and finality.
    private mutating func legacyChunk(_ index: UInt64) throws(ProtectionError) -> [UInt8] {
        let final = index == legacyRecordCount - 1
        let record = try POSIX.preadUpTo(
            fd, upTo: Int(header.legacyRecordLength), at: header.legacyRecordOffset(index), path: path)
        let plaintext = try withRawBytes(of: record) { (raw) throws(ProtectionError) in
            try EncryptedFileFormat.openLegacyRecord(raw, index: index, final: final, header: header, fileKey: fileKey)
        }
        guard final || plaintext.count == chunkSize else {
            throw .invalidEnvelope(reason: "chunk \(index) holds \(plaintext.count) bytes; a chunk before the last holds \(chunkSize)")
        }
        cachedIndex = index
        cachedPlaintext = plaintext
        return plaintext
    }

    // MARK: Reading

    /// The plaintext of chunk `index` (< the chunk count), authenticated, exactly as long as the content
    /// there.
    mutating func chunk(_ index: UInt64) throws(ProtectionError) -> [UInt8] {
        if cachedIndex == index { return cachedPlaintext }
        if header.isLegacy { return try legacyChunk(index) }
        let chunkStart = index * UInt64(chunkSize)
        let expected = Int(min(UInt64(chunkSize), length - chunkStart))
        let slotLength = Int(header.slotLength)
        let first = header.slotOffset(chunk: index, slot: 0)
        let slot0 = try POSIX.preadUpTo(fd, upTo: slotLength, at: first, path: path)
        let prefix1 = try POSIX.preadUpTo(fd, upTo: 8, at: first + header.slotLength, path: path)
        let generation0 = slot0.withUnsafeBytes { EncryptedFileFormat.generation($0) }
        let generation1 = prefix1.withUnsafeBytes { EncryptedFileFormat.generation($0) }
        var candidates: [Int] = []
        if generation0 != 0 { candidates.append(0) }
        if generation1 != 0 { candidates.insert(1, at: generation1 > generation0 ? 0 : candidates.count) }
        var lastError: ProtectionError?
        for slot in candidates {
            let bytes = slot == 0 ? slot0 : try POSIX.preadUpTo(fd, upTo: slotLength, at: first + header.slotLength, path: path)
            do throws(ProtectionError) {
                let (_, plaintext) = try withRawBytes(of: bytes) { (raw) throws(ProtectionError) in
                    try EncryptedFileFormat.openRecord(raw, index: index, header: header, fileKey: fileKey, maximumLength: chunkSize)
                }
                guard plaintext.count >= expected else {
                    throw ProtectionError.invalidEnvelope(reason: "chunk \(index) holds \(plaintext.count) bytes; the file's size needs \(expected)")
                }
                slots[index] = SlotState(generation0: generation0, generation1: generation1, valid: slot)
                let result = plaintext.count == expected ? plaintext : Array(plaintext[..<expected])
                cachedIndex = index
                cachedPlaintext = result
                return result
            } catch {
                lastError = error
            }
        }
        throw lastError ?? .invalidEnvelope(reason: "truncated: chunk \(index) is missing")
    }

    /// Copies up to `count` bytes from `offset` into `output`; fewer at the end of the content.
    mutating func read(at offset: UInt64, count: Int, into output: inout [UInt8]) throws(ProtectionError) {
        guard offset < length, count > 0 else { return }
        let end = min(length, offset + UInt64(count))
        var position = offset
        while position < end {
            let index = position / UInt64(chunkSize)
            let chunkStart = index * UInt64(chunkSize)
            let plaintext = try chunk(index)
            let from = Int(position - chunkStart)
            let to = Int(min(end - chunkStart, UInt64(plaintext.count)))
            output.append(contentsOf: plaintext[from..<to])
            position = chunkStart + UInt64(to)
        }
    }

    // MARK: Writing

    /// Writes `bytes` at `offset`; a gap between the end of the content and `offset` reads as zeros.
    mutating func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(ProtectionError) {
        guard !bytes.isEmpty else { return }
        guard !header.isLegacy else { throw .unsupportedVersion(header.version) }
        let (end, overflow) = offset.addingReportingOverflow(UInt64(bytes.count))
        guard !overflow, end <= header.maximumContentLength else {
            throw .invalidOffset(path: path, offset: offset)
        }
        try apply(bytes, at: offset, end: end)
    }

    /// Sets the content length: cut, or extended with zeros.
    mutating func truncate(to newLength: UInt64) throws(ProtectionError) {
        guard newLength <= header.maximumContentLength else { throw .invalidOffset(path: path, offset: newLength) }
        if newLength == length { return }
        guard !header.isLegacy else { throw .unsupportedVersion(header.version) }
        if newLength > length {
            return try apply(UnsafeRawBufferPointer(start: nil, count: 0), at: newLength, end: newLength)
        }
        let count = header.chunkCount(newLength)
        cachedIndex = nil
        try writeLength(newLength)
        try POSIX.truncateFD(fd, to: header.physicalLength(chunks: count), path: path)
        preallocatedEnd = min(preallocatedEnd, header.physicalLength(chunks: count))
        slots = slots.filter { $0.key < count }
        tailIsClean = true
    }

    func synchronize() throws(ProtectionError) {
        try POSIX.fsyncFD(fd, path: path)
    }

    /// Writes `data` over `[offset, end)` and zeros over `[length, offset)`, chunk by chunk; then the length.
    private mutating func apply(_ data: UnsafeRawBufferPointer, at offset: UInt64, end: UInt64) throws(ProtectionError) {
        let size = UInt64(chunkSize)
        let oldLength = length
        let oldCount = header.chunkCount(oldLength)
        let newLength = max(oldLength, end)
        if header.chunkCount(newLength) > oldCount && !tailIsClean {
            // Slots past the last chunk may hold records of a longer past (a crash between a shrink's size
            // record and its ftruncate): drop them, so that new chunks start clean.
            let physical = header.physicalLength(chunks: oldCount)
            if Int64(try POSIX.fstatFD(fd, path: path).st_size) > physical {
                try POSIX.truncateFD(fd, to: physical, path: path)
                preallocatedEnd = min(preallocatedEnd, physical)
            }
            tailIsClean = true
        }
        let newCount = header.chunkCount(newLength)
        if newCount > oldCount { preallocate(from: oldCount, to: newCount) }
        let first = min(offset, oldLength) / size
        let last = (end - 1) / size
        do throws(ProtectionError) {
            for index in first...last {
                let chunkStart = index * size
                let oldChunkLength = oldLength > chunkStart ? Int(min(size, oldLength - chunkStart)) : 0
                let newChunkLength = Int(min(size, newLength - chunkStart))
                let writeStart = Int(min(size, max(offset, chunkStart) - chunkStart))
                let writeEnd = end > chunkStart ? Int(min(size, end - chunkStart)) : 0
                let exists = index < oldCount
                if writeStart == 0 && writeEnd >= newChunkLength {
                    let from = Int(chunkStart - offset)
                    let piece = UnsafeRawBufferPointer(rebasing: data[from..<from + newChunkLength])
                    try put(index, piece, exists: exists, plaintext: nil)
                    continue
                }
                var plaintext = oldChunkLength > 0 ? try chunk(index) : []
                if plaintext.count < newChunkLength {
                    plaintext.append(contentsOf: repeatElement(0, count: newChunkLength - plaintext.count))
                }
                if writeStart < writeEnd {
                    let from = Int(chunkStart + UInt64(writeStart) - offset)
                    plaintext.withUnsafeMutableBytes { target in
                        target.baseAddress!.advanced(by: writeStart)
                            .copyMemory(from: data.baseAddress!.advanced(by: from), byteCount: writeEnd - writeStart)
                    }
                }
                try withRawBytes(of: plaintext) { (raw) throws(ProtectionError) in
                    try put(index, raw, exists: exists, plaintext: plaintext)
                }
            }
            if newLength != oldLength { try writeLength(newLength) }
        } catch {
            cachedIndex = nil
            throw error
        }
    }

    /// Reserves disk space for both slots of chunks `from ..< to`, and of the next ``preallocationChunks``
    /// (Linux; best effort). A chunk's second slot is a hole until its first rewrite, so a file written front
    /// to back would otherwise get one small extent per chunk, which the file system allocates, and later
    /// frees, far more slowly than a contiguous run (sequential writes measured at about half the speed).
    /// The size does not change (`FALLOC_FL_KEEP_SIZE`): reserved blocks read as zeros, as holes do, so the
    /// format and every reader are unaffected; the price is disk space for the second slots.
    private mutating func preallocate(from oldCount: UInt64, to newCount: UInt64) {
        #if canImport(Glibc)
        let needed = header.physicalLength(chunks: newCount)
        guard needed > preallocatedEnd else { return }
        let start = max(preallocatedEnd, header.physicalLength(chunks: oldCount))
        let end = header.physicalLength(chunks: newCount + Self.preallocationChunks)
        preallocatedEnd = cidc_preallocate(fd, start, end - start) == 0 ? end : Int64.max
        #endif
    }

    /// Seals `piece` as chunk `index` into the slot not in use.
    private mutating func put(_ index: UInt64, _ piece: UnsafeRawBufferPointer, exists: Bool, plaintext: [UInt8]?) throws(ProtectionError) {
        var state = SlotState(generation0: 0, generation1: 0, valid: nil)
        if exists {
            if let known = slots[index] {
                state = known
            } else {
                state = try slotStateForOverwrite(index)
            }
        }
        let generation = state.next
        guard generation != 0 else { throw .invalidEnvelope(reason: "chunk \(index): record generations exhausted") }
        let slot = state.target
        let record = try EncryptedFileFormat.sealRecord(piece, index: index, generation: generation, header: header, fileKey: fileKey)
        cachedIndex = nil
        try POSIX.pwriteAll(fd, record, at: header.slotOffset(chunk: index, slot: slot), path: path)
        state.wrote(generation, into: slot)
        slots[index] = state
        if let plaintext {
            cachedIndex = index
            cachedPlaintext = plaintext
        }
    }

    /// The slots of an existing chunk about to be replaced whole: the record in use is found by reading it
    /// (so it is never the one overwritten); a chunk with no readable record gets its older slot rewritten.
    private mutating func slotStateForOverwrite(_ index: UInt64) throws(ProtectionError) -> SlotState {
        do throws(ProtectionError) {
            _ = try chunk(index)
            if let known = slots[index] { return known }
        } catch {
            if case .ioFailure = error { throw error }
        }
        let first = header.slotOffset(chunk: index, slot: 0)
        let prefix0 = try POSIX.preadUpTo(fd, upTo: 8, at: first, path: path)
        let prefix1 = try POSIX.preadUpTo(fd, upTo: 8, at: first + header.slotLength, path: path)
        return SlotState(
            generation0: prefix0.withUnsafeBytes { EncryptedFileFormat.generation($0) },
            generation1: prefix1.withUnsafeBytes { EncryptedFileFormat.generation($0) }, valid: nil)
    }

    private mutating func writeLength(_ newLength: UInt64) throws(ProtectionError) {
        let generation = sizeSlots.next
        guard generation != 0 else { throw .invalidEnvelope(reason: "size record generations exhausted") }
        let slot = sizeSlots.target
        try EncryptedFileFormat.writeSizeRecord(newLength, generation: generation, slot: slot, fd: fd, path: path, header: header, fileKey: fileKey)
        sizeSlots.wrote(generation, into: slot)
        length = newLength
    }
}
