import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension FileProtectionManager {
    /// Protects the plaintext of the regular file at `sourcePath` into a protected-stream envelope
    /// (<doc:DataAndFileProtection#Stream-format,-version-1>) at `destinationPath`, atomically (temporary file, `fsync`,
    /// `rename`), 1 MiB at a time; `sourcePath` is left as it is.
    ///
    /// ```swift
    /// try files.protect(atPath: "/in/video.mp4", toPath: "/out/video.idps", owner: "alice@contoso.com")
    /// ```
    /// The envelope is owned by `owner`, and so is the file at `destinationPath` (a wipe of that owner
    /// removes it). A source that is encrypted at rest is decrypted (authenticated) while it is read.
    ///
    /// Access, from the recorded owners of both files and the caller's `IdentityContext.effectiveFileIdentity`:
    /// - reading the source is a read of its owner's data; when the envelope gets another owner, that data is
    ///   transferred to it (``ProtectedDataAccess/transfer(to:)``);
    /// - the envelope is data created for `owner`;
    /// - a file already at `destinationPath` is replaced: a modification of its owner's data and, for another
    ///   owner, a transfer of it (as ``writeFile(atPath:contents:)`` over it).
    /// - Parameters:
    ///   - sourcePath: the regular file to read.
    ///   - destinationPath: where the envelope is written.
    ///   - owner: the envelope's owner; `nil` means the caller's effective file identity, and if that is
    ///     `nil` too, `Identity.unmanaged`.
    ///   - chunkSize: plaintext bytes per record, 1 byte ... 16 MiB; `nil` means ``chunkSize``.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file at `sourcePath`, or something other than a regular file at
    ///   `destinationPath`; ``ProtectionError/accessDenied(identity:reader:)`` (108) a refused read, modification or transfer; ``ProtectionError/accountBlocked(identity:reason:)`` (109) an owner is blocked; ``ProtectionError/policyUnavailable(reason:)`` (115) the
    ///   policy is not loaded; ``ProtectionError/invalidEnvelope(reason:)`` (100) a chunk size out of range; 100...104 a damaged encrypted source; ``ProtectionError/keyNotFound(identity:keyID:)`` (103) or ``ProtectionError/cryptoBackendFailure(_:)`` (107) key
    ///   or crypto failures; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused. On any error the destination is untouched.
    public func protect(
        atPath sourcePath: String, toPath destinationPath: String, owner: Identity? = nil,
        chunkSize: Int? = nil
    ) throws(ProtectionError) {
        let source = try target(sourcePath)
        let destination = try target(destinationPath)
        let owner = owner ?? IdentityContext.effectiveFileIdentity ?? .unmanaged
        let info = try regularFileInfo(source)
        let fd = try POSIX.openFile(source, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        let header = try EncryptedFileFormat.readHeader(fd, path: source)
        let sourceOwner = try currentOwner(path: source, info: info, header: header)
        let reader = IdentityContext.effectiveFileIdentity
        try policy.authorize(.read(reader: reader), to: sourceOwner)
        if let previous = sourceOwner.owner, previous != owner { try policy.authorize(.transfer(to: owner), to: sourceOwner) }
        let replaced = try authorizeReplacing(destination, newOwner: owner)
        try creating(for: owner) { () throws(ProtectionError) in
            var sealer = try StreamEndpoints(keyStore: keyStore, policy: policy)
                .sealer(owner: owner, chunkSize: chunkSize ?? self.chunkSize)
            let plaintext: any PlaintextSource
            if let header {
                plaintext = DecryptingSource(try decryptor(fd: fd, path: source, header: header))
            } else {
                guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(source, "lseek") }
                plaintext = FileDescriptorSource(fd: fd, path: source)
            }
            var input = plaintext
            // The file holding the envelope is isolated when the envelope is (encrypted), and when it holds its
            // isolated owner's own data (as a copy keeps the original's record).
            let carried = record(of: owner, carrying: sourceOwner).isIsolated
            let record = RecordedOwner(owner, isolated: sealer.header.keyID != nil || carried)
            try writeAtomically(destination, owner: record, replacing: replaced) { (output) throws(ProtectionError) in
                while true {
                    let piece = try input.read(upTo: Self.streamPieceSize)
                    try output.write(try withRawBytes(of: piece) { (raw) throws(ProtectionError) in try sealer.append(raw) })
                    if piece.count < Self.streamPieceSize { break }
                }
                try output.write(try sealer.finish())
            }
        }
    }

    /// Writes the plaintext of the protected stream at `sourcePath` to `destinationPath`, atomically: the
    /// destination appears only when every record authenticated. A file that is not a stream envelope is
    /// copied unchanged.
    ///
    /// ```swift
    /// try IdentityContext.withThreadIdentity("alice@contoso.com") {
    ///     try files.unprotect(atPath: "/out/video.idps", toPath: "/in/copy.mp4")
    /// }
    /// ```
    /// The copy is owned by the source file's recorded owner (for a source with none, the owner its envelope
    /// names), so a wipe of that owner removes it too: never by whatever owner a header names, which a clear
    /// envelope does not authenticate.
    ///
    /// Access, from the recorded owners and the caller's `IdentityContext.effectiveFileIdentity`: reading
    /// the source is a read of its recorded owner's data and of the owner its envelope names; plaintext of an
    /// envelope owner other than the source's recorded owner is transferred to the recorded owner; a file
    /// already at `destinationPath` is replaced, which modifies its owner's data and, for another owner,
    /// transfers it. All of it is decided before a byte is written.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file at `sourcePath`, or something other than a regular file at
    ///   `destinationPath`; ``ProtectionError/accessDenied(identity:reader:)`` (108) a refused read, modification or transfer; ``ProtectionError/accountBlocked(identity:reason:)`` (109) an owner is blocked; ``ProtectionError/policyUnavailable(reason:)`` (115) the
    ///   policy is not loaded; ``ProtectionError/invalidEnvelope(reason:)`` (100) malformed, truncated or trailing bytes, or a file in another of the
    ///   runtime's formats; ``ProtectionError/unsupportedVersion(_:)`` (101) version; ``ProtectionError/authenticationFailed`` (102) tampered, reordered or dropped record; ``ProtectionError/keyNotFound(identity:keyID:)`` (103) key missing; ``ProtectionError/invalidIdentity(reason:)`` (104) owner
    ///   field; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused. The destination is untouched on any error.
    public func unprotect(atPath sourcePath: String, toPath destinationPath: String) throws(ProtectionError) {
        let source = try target(sourcePath)
        let destination = try target(destinationPath)
        let info = try regularFileInfo(source)
        let fd = try POSIX.openFile(source, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        let reader = IdentityContext.effectiveFileIdentity
        let recordedOwner = try currentOwner(path: source, info: info, header: try EncryptedFileFormat.readHeader(fd, path: source))
        try policy.authorize(.read(reader: reader), to: recordedOwner)
        let envelope = try streamOwner(fd: fd, path: source)
        let envelopeOwner = envelope?.owner
        // The copy is the source file's: its recorded owner decides, never the owner a header names (a clear
        // envelope's header is not authenticated). Plaintext of another owner's envelope becomes the
        // recorded owner's: a transfer.
        let owner = recordedOwner.owner ?? envelopeOwner
        if let envelope, let envelopeOwner, envelopeOwner != owner { try policy.authorize(.transfer(to: owner), to: envelope) }
        // The copy stays isolated when the source file or its envelope was (an encrypted envelope is), for
        // as long as it stays with that owner.
        var copy = record(of: owner, carrying: recordedOwner)
        if let envelope { copy = RecordedOwner(owner, isolated: copy.isIsolated || record(of: owner, carrying: envelope).isIsolated) }
        let replaced = try authorizeReplacing(destination, newOwner: owner)
        try creating(for: owner) { () throws(ProtectionError) in
            var opener = StreamEndpoints(keyStore: keyStore, policy: policy).opener(reader: reader)
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(source, "lseek") }
            var input = FileDescriptorSource(fd: fd, path: source)
            try writeAtomically(destination, owner: copy, replacing: replaced) { (output) throws(ProtectionError) in
                while true {
                    let piece = try input.read(upTo: Self.streamPieceSize)
                    try output.write(try withRawBytes(of: piece) { (raw) throws(ProtectionError) in try opener.append(raw) })
                    if piece.count < Self.streamPieceSize { break }
                }
                try output.write(try opener.finish())
            }
        }
    }

    // MARK: Internals

    /// Bytes read from a source file at a time.
    static var streamPieceSize: Int { 1 << 20 }

    /// The owner named by the stream envelope at the start of `fd` as the envelope records it (isolated when
    /// encrypted), or `nil` when the file is not one.
    /// - Throws: ``ProtectionError/invalidEnvelope(reason:)`` (100) a truncated header or another of the runtime's formats; ``ProtectionError/unsupportedVersion(_:)`` (101), ``ProtectionError/invalidIdentity(reason:)`` (104) as the header says.
    private func streamOwner(fd: Int32, path: String) throws(ProtectionError) -> RecordedOwner? {
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(path, "lseek") }
        var prefix: [UInt8] = []
        while true {
            let piece = try POSIX.readUpTo(fd, upTo: 4096, path: path)
            prefix += piece
            let atEnd = piece.count < 4096
            let parsed = try withRawBytes(of: prefix) { (raw) throws(ProtectionError) in
                try StreamFormat.parseHeader(raw, atEnd: atEnd)
            }
            switch parsed {
            case .notAStream: return nil
            case let .header(header): return header.recordedOwner
            case .needMore: if atEnd { return nil }
            }
        }
    }

    /// The checks before whatever is at `path` is replaced by data of `newOwner`; returns the `stat` of the
    /// file there, `nil` when there is none (nothing to check).
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) something other than a regular file is there; the refusals of
    ///   ``authorizeHandOver(of:to:)``.
    func authorizeReplacing(_ path: String, newOwner: Identity?) throws(ProtectionError) -> stat? {
        guard let existing = try destinationInfo(path) else { return nil }
        guard POSIX.isRegular(existing) else { throw .fileNotFound(path: path) }
        try authorizeHandOver(of: try currentOwner(path: path, info: existing, header: try encryptedHeader(path)), to: newOwner)
        return existing
    }

    /// Writes `destination` atomically (temporary file with mode `0600`, `fsync`, `rename`), owned by `owner`:
    /// `body` writes the content; on any error the destination is left as it was. The index forgets the file
    /// it `replaced`.
    private func writeAtomically(
        _ destination: String, owner: RecordedOwner, replacing replaced: stat?,
        _ body: (AtomicFile) throws(ProtectionError) -> Void
    ) throws(ProtectionError) {
        try installCopy(destination, mode: 0o600, owner: owner, replacing: replaced, body)
    }
}
