/// Something plaintext is read from in pieces: a file, or an encrypted file being decrypted.
protocol PlaintextSource {
    /// Up to `count` bytes; fewer only at the end; empty at the end.
    mutating func read(upTo count: Int) throws(ProtectionError) -> [UInt8]
}

/// Plaintext straight from a file descriptor.
struct FileDescriptorSource: PlaintextSource {
    let fd: Int32
    let path: String

    mutating func read(upTo count: Int) throws(ProtectionError) -> [UInt8] {
        try POSIX.readUpTo(fd, upTo: count, path: path)
    }
}

/// Plaintext of an encrypted file, each chunk authenticated before a byte of it is handed out.
struct DecryptingSource: PlaintextSource {
    var decryptor: EncryptedFileFormat.Decryptor
    private var buffer: [UInt8] = []
    private var position = 0

    init(_ decryptor: EncryptedFileFormat.Decryptor) {
        self.decryptor = decryptor
    }

    mutating func read(upTo count: Int) throws(ProtectionError) -> [UInt8] {
        var result: [UInt8] = []
        while result.count < count {
            if position == buffer.count {
                guard let chunk = try decryptor.nextChunk() else { break }
                buffer = chunk
                position = 0
                continue
            }
            let take = min(count - result.count, buffer.count - position)
            result.append(contentsOf: buffer[position..<position + take])
            position += take
        }
        return result
    }
}
