import Foundation
import IdentityRuntime

extension FileProtectionManager {
    /// Creates or replaces the file at `path` with `contents`, atomically, owned by the caller's
    /// `IdentityContext.effectiveFileIdentity`, with the enclosing directory's owner ranking between its thread
    /// and process levels (``protectDirectory(atPath:owner:)``); no owner when none of them exists.
    ///
    /// When the policy manages that identity and requires file encryption, the file is written encrypted.
    /// An existing file keeps its permission bits; a new one gets `0600` when encrypted, `0644` otherwise.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) `path` names a directory or other non-regular file; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused (a missing parent
    ///   directory, a path under a regular file, a read-only file system); ``ProtectionError/keyNotFound(identity:keyID:)`` (103) or ``ProtectionError/cryptoBackendFailure(_:)`` (107) key or crypto failures;
    ///   ``ProtectionError/accessDenied(identity:reader:)`` (108) the file belongs to another account that may not be handed to the caller (replacing it is a
    ///   transfer, see ``protect(atPath:owner:)``); ``ProtectionError/accountBlocked(identity:reason:)`` (109) an owner is blocked.
    public func writeFile(atPath path: String, contents: Data) throws(ProtectionError) {
        let path = try target(path)
        let owner = try ownerForNewFile(at: path, explicit: nil)
        try creating(for: owner) { () throws(ProtectionError) in try write(contents, to: path, owner: owner) }
    }

    /// How many times ``write(_:to:owner:)`` decides again when files keep taking a free name before its own.
    private static let writeAttempts = 16

    private func write(_ contents: Data, to path: String, owner: Identity?) throws(ProtectionError) {
        var key: ProtectionKey?
        for _ in 0..<Self.writeAttempts {
            let previous = try destinationInfo(path)
            if let previous, !POSIX.isRegular(previous) { throw .fileNotFound(path: path) }
            if let previous {
                // Replacing another owner's file gives the path to the new owner: a transfer of it.
                try authorizeHandOver(of: try currentOwner(path: path, info: previous, header: try encryptedHeader(path)), to: owner)
            }
            // The key comes before anything is written, even a temporary file: a store that does not answer in
            // time, or a cancelled asynchronous call, ends the write here.
            var sealing: (key: ProtectionKey, header: EncryptedFileFormat.Header)?
            if let owner, requiresEncryption(owner) {
                let sealingKey: ProtectionKey
                if let key { sealingKey = key } else { sealingKey = try keyStore.keyForNewData(of: owner) }
                key = sealingKey
                sealing = (sealingKey, try EncryptedFileFormat.newHeader(owner: owner, key: sealingKey, chunkSize: chunkSize))
            }
            let mode = previous.map { $0.st_mode & 0o7777 } ?? (sealing != nil ? 0o600 : 0o644)
            let written = try installAtomically(path, mode: mode, owner: policy.record(ofNewDataOwnedBy: owner), replacing: previous) {
                output throws(ProtectionError) in
                if let sealing {
                    var source = DataSource(data: contents)
                    try EncryptedFileFormat.encrypt(&source, header: sealing.header, key: sealing.key, into: output)
                } else {
                    try withRawBytes(of: contents) { (raw) throws(ProtectionError) in try output.write(raw) }
                }
            }
            // A file took the free name since it was looked at: replacing it is decided as for one that was
            // there (a hand-over of another account's file is refused), never done unchecked.
            if written { return }
        }
        throw .ioFailure(path: path, operation: "create (files kept taking the name)", errno: EEXIST)
    }

    /// The plaintext of the file at `path`: decrypted and authenticated when it is encrypted, as stored
    /// otherwise.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file; 100...104 a damaged or unreadable encrypted file; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func readFile(atPath path: String) throws(ProtectionError) -> Data {
        let path = try target(path)
        let info = try regularFileInfo(path)
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        guard let header = try EncryptedFileFormat.readHeader(fd, path: path) else {
            try policy.authorize(.read(reader: IdentityContext.effectiveFileIdentity), to: try currentOwner(path: path, info: info, header: nil))
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(path, "lseek") }
            return Data(try POSIX.readToEnd(fd, path: path))
        }
        var decryptor = try decryptor(fd: fd, path: path, header: header)
        var result = Data()
        while let chunk = try decryptor.nextChunk() { result.append(contentsOf: chunk) }
        return result
    }

    /// Opens the file at `path` with `options` as a plain `FileHandle`, for files that are stored in the clear.
    /// When the call creates the file, or truncates it, the file's owner becomes the caller's
    /// `IdentityContext.effectiveFileIdentity`, with the enclosing directory's owner ranking between its thread
    /// and process levels (``protectDirectory(atPath:owner:)``); no owner when none of them exists.
    ///
    /// ```swift
    /// let handle = try files.openFile(atPath: path, options: [.write, .create, .truncate])
    /// defer { try? handle.close() }
    /// try handle.write(contentsOf: bytes)
    /// ```
    /// A plaintext handle is never handed out for a file that must be encrypted: a file that is encrypted, or
    /// whose owner (the new owner, for a call that creates or truncates) is managed with file encryption
    /// required, is refused with ``ProtectionError/encryptionRequired(path:)`` (110) before anything is
    /// created, truncated or read. Open such files with ``openProtectedFile(atPath:options:owner:permissions:)``.
    /// - Parameters:
    ///   - path: the file.
    ///   - options: how to open it (``FileOpenOptions``).
    ///   - permissions: mode bits of a newly created file (before the process umask).
    ///
    /// The access check comes before the file is touched: opening an existing file is a read of its owner's
    /// data by the caller's effective file identity; truncating it gives it to the new owner (a transfer, by a
    /// caller that may see it); creating one creates data for the new owner, and a handle on the new owner's
    /// file needs the caller to be allowed to read (for writing: modify) that owner's data. A refused call
    /// leaves no file behind and empties none. A file created or truncated gets its owner under a temporary
    /// name and takes the path in one step (as ``ProtectedFile`` does): a failure or a crash leaves the old
    /// file and its owner; truncation replaces the file (other descriptors on it keep the old content).
    /// > Note: The `FileHandle` is a plain descriptor: the access check decides the open, and the handle then
    /// > reads and writes as the operating system lets it, also after its owner is blocked. A
    /// > ``ProtectedFile`` asks the policy again on every operation. A handle that writes into an existing
    /// > file whose owner is managed at the open records the file isolated then (see *Recorded isolation*).
    /// - Throws: ``ProtectionError/encryptionRequired(path:)`` (110) the file must be encrypted; ``ProtectionError/fileNotFound(path:)`` (105) missing (without ``FileOpenOptions/create``) or a
    ///   directory; ``ProtectionError/accessDenied(identity:reader:)`` (108) the caller may not see the owner's data; ``ProtectionError/accountBlocked(identity:reason:)`` (109) an owner is blocked; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func openFile(
        atPath path: String, options: FileOpenOptions, permissions: UInt16 = 0o644
    ) throws(ProtectionError) -> FileHandle {
        let path = try target(path)
        var flags: Int32
        let writes = options.writes
        switch (options.contains(.read), writes) {
        case (_, false): flags = O_RDONLY
        case (false, true): flags = O_WRONLY
        case (true, true): flags = O_RDWR
        }
        if options.contains(.append) { flags |= O_APPEND }
        let replaces = options.contains(.create) || options.contains(.truncate)
        let newOwner = replaces ? try ownerForNewFile(at: path, explicit: nil) : nil
        let existing = try destinationInfo(path)
        if let existing {
            guard POSIX.isRegular(existing) else { throw .fileNotFound(path: path) }
            let owner = try currentOwner(path: path, info: existing, header: try encryptedHeader(path))
            if options.contains(.truncate) {
                try authorizeHandOver(of: owner, to: newOwner)
            } else {
                let caller = IdentityContext.effectiveFileIdentity
                try policy.authorize(writes ? .modify(writer: caller) : .read(reader: caller), to: owner)
            }
        } else if !options.contains(.create) {
            throw .fileNotFound(path: path)
        }
        let newOwnerNeedsEncryption = newOwner.map(requiresEncryption) ?? false
        if options.contains(.truncate) && newOwnerNeedsEncryption { throw .encryptionRequired(path: path) }
        if existing != nil && options.contains(.create) && options.contains(.exclusive) {
            if newOwnerNeedsEncryption { throw .encryptionRequired(path: path) }
            throw .ioFailure(path: path, operation: "open", errno: EEXIST)
        }
        guard existing == nil || options.contains(.truncate) else {
            return try openExisting(path, flags: flags, writes: writes)
        }
        // The handle reads (or writes) what the new owner puts into the file later: the caller must be
        // allowed that, as for an existing file of that owner.
        let caller = IdentityContext.effectiveFileIdentity
        try policy.authorize(writes ? .modify(writer: caller) : .read(reader: caller), to: policy.record(ofNewDataOwnedBy: newOwner))
        return try creating(for: newOwner) { () throws(ProtectionError) -> FileHandle in
            // The new file would have to be encrypted: no plaintext handle for it (after the refusals, which
            // say more).
            if newOwnerNeedsEncryption { throw .encryptionRequired(path: path) }
            // The new (or emptied) file gets its owner under a temporary name and takes the path in one step:
            // a failure or a crash before that leaves the old file and its owner record as they were.
            let installed = try AtomicFile.install(
                at: path, flags: flags, mode: existing.map { $0.st_mode & 0o7777 } ?? mode_t(permissions),
                exactMode: existing != nil, replacing: existing != nil, owners: owners
            ) { (fd, temporaryPath) throws(ProtectionError) in
                try owners.setOwner(policy.record(ofNewDataOwnedBy: newOwner), fd: fd, path: temporaryPath)
            }
            guard let fd = installed else {
                // A file appeared since it was looked at: open it as an existing file, with its own checks.
                return try openFile(atPath: path, options: options.subtracting(.create), permissions: permissions)
            }
            // The replaced file's index entry goes with it: its inode may be reused by a file nobody owns.
            if let existing {
                do throws(ProtectionError) { try owners.forget([existing]) } catch {
                    POSIX.closeFile(fd)
                    throw error
                }
            }
            return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        }
    }

    /// ``openFile(atPath:options:permissions:)`` of an existing file without truncation, once the access
    /// checks are done: nothing about the file changes but, for a handle that `writes`, the record that it is
    /// isolated (``recordIsolation(ofWritesTo:fd:path:)``).
    private func openExisting(_ path: String, flags: Int32, writes: Bool) throws(ProtectionError) -> FileHandle {
        let fd = try POSIX.openFile(path, flags)
        do throws(ProtectionError) {
            let info = try POSIX.fstatFD(fd, path: path)
            guard POSIX.isRegular(info) else { throw ProtectionError.fileNotFound(path: path) }
            if let header = try encryptedHeader(path) {
                try policy.authorize(.read(reader: IdentityContext.effectiveFileIdentity), to: header.recordedOwner)
                throw ProtectionError.encryptionRequired(path: path)
            }
            let owner = try currentOwner(path: path, info: info, header: nil)
            try policy.authorize(.read(reader: IdentityContext.effectiveFileIdentity), to: owner)
            if let owner = owner.owner, requiresEncryption(owner) { throw ProtectionError.encryptionRequired(path: path) }
            if writes { _ = try recordIsolation(ofWritesTo: owner, fd: fd, path: path) }
        } catch {
            POSIX.closeFile(fd)
            throw error
        }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }
}

/// Plaintext from memory.
struct DataSource: PlaintextSource {
    let data: Data
    var offset = 0

    mutating func read(upTo count: Int) throws(ProtectionError) -> [UInt8] {
        let end = min(data.count, offset + count)
        defer { offset = end }
        return Array(data[data.startIndex + offset..<data.startIndex + end])
    }
}
