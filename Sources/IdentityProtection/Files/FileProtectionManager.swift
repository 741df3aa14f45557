import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// File owners, encryption at rest and the selective wipe, for files under registered roots.
///
/// ```swift
/// let files = try FileProtectionManager(
///     roots: ["/var/lib/app/documents"], keyStore: keys, policy: policy,
///     stateDirectory: "/var/lib/app/protection")
///
/// try IdentityContext.withThreadIdentity("alice@contoso.com") {
///     try files.writeFile(atPath: "/var/lib/app/documents/q3.txt", contents: report)  // owner: alice,
/// }                                                                                  // encrypted at rest
/// try files.protectionInfo(atPath: "/var/lib/app/documents/q3.txt")?.owner   // alice@contoso.com
/// try files.readFile(atPath: "/var/lib/app/documents/q3.txt")              // the plaintext
/// try files.removeFiles(ownedBy: "alice@contoso.com")                      // the selective wipe
/// ```
///
/// ## Owners
/// A file created, or opened with truncation, through ``writeFile(atPath:contents:)`` or
/// ``openFile(atPath:options:permissions:)`` is owned by the calling thread's or task's
/// `IdentityContext.effectiveFileIdentity` (`nil`: the file gets no owner). ``protect(atPath:owner:)`` sets an
/// owner explicitly. Owners live in the `user.identityruntime.owner` extended attribute, or in the index on
/// file systems without user extended attributes (see ``OwnerStorage``); both survive renames within a file
/// system. An encrypted file also names its owner in its authenticated header, which takes precedence.
///
/// ## Encryption at rest
/// When the policy manages the owner and requires file encryption, ``writeFile(atPath:contents:)`` and
/// ``protect(atPath:owner:)`` store the file encrypted. ``encryptFile(atPath:owner:)`` and ``decryptFile(atPath:)``
/// convert in place, atomically: a temporary file in the same directory, `fsync`, `rename`, `fsync` of the
/// directory. A crash leaves the old file or the new one; a failure leaves the original untouched. Large files
/// are streamed in authenticated chunks (``chunkSize``).
///
/// ## Random access
/// ``openProtectedFile(atPath:options:owner:permissions:)`` returns a ``ProtectedFile``: reads and writes at any
/// offset, encrypted in authenticated chunks when required. ``openFile(atPath:options:permissions:)`` hands out
/// a plain `FileHandle` only for files stored in the clear, and refuses files that must be encrypted (``ProtectionError/encryptionRequired(path:)`` (110)).
///
/// ## Paths and URLs
/// Every operation on a file takes its path as `atPath:` (a second path as `toPath:`) and, in an overload, a
/// file `URL` as `at:` (`to:`), as `FileManager` does: ``readFile(atPath:)`` and ``readFile(at:)``. A URL
/// that is not a file URL names no file: ``ProtectionError/fileNotFound(path:)`` (105), with its
/// `absoluteString`, before anything is read or written. A call that names the owner of new data takes it as
/// `owner:`; ``writeFile(atPath:contents:)`` and ``openFile(atPath:options:permissions:)`` name none (see *Owners*).
///
/// Thread-safe: call it from any number of threads and tasks at once. A write replaces only the file it
/// checked: a new file takes a free name with `link(2)`, which refuses a name another file took since the call
/// looked, and a replacement first sees that the file at the name is still the one it checked (and holds it
/// open until its owner record is forgotten). Otherwise ``writeFile(atPath:contents:)`` decides again as for
/// the file now there (replacing another account's file is a hand-over, refused unless its policy allows it),
/// and the copies and in-place conversions (``decryptFile(atPath:toPath:)``, ``protect(atPath:toPath:owner:chunkSize:)``,
/// ``unprotect(atPath:toPath:)``, ``encryptFile(atPath:owner:)``, ``decryptFile(atPath:)``) refuse with
/// ``ProtectionError/ioFailure(path:operation:errno:)`` (`EEXIST`), leaving it. A file system without hard links
/// (FAT) refuses new files with the `link` failure (106) rather than risk that. Between that last look and the
/// rename itself two writers race as `rename(2)` does; neither file is torn.
public final class FileProtectionManager: Sendable {
    /// Where keys come from.
    public var keyStore: any KeyStore { storage.keyStore }
    /// Which identities are managed and need encryption at rest.
    public let policy: any ManagedIdentityPolicy
    /// Where the owner index and the wipe journal live: its real path (symbolic links resolved when the
    /// manager was made).
    public var stateDirectory: String { storage.stateDirectory }
    /// Plaintext bytes per encrypted chunk of files this manager writes (files it reads carry their own).
    public let chunkSize: Int
    /// Everything but the policy: roots, keys, owners, the wipe journal, creations in flight.
    package let storage: ProtectedRoots

    var owners: FileOwnerStore { storage.owners }
    var creations: CreationTracker { storage.creations }

    /// A manager for files under `roots`.
    ///
    /// - Parameters:
    ///   - roots: the directories ``removeFiles(ownedBy:)`` searches. More can be added with ``addRoot(_:)-(String)``.
    ///   - keyStore: where the keys of managed owners are kept.
    ///   - policy: which owners are managed, whether their files are encrypted, and the access check.
    ///   - stateDirectory: created (mode `0700`) when missing, tightened to `0700` when others can read or enter
    ///     it; holds the owner index `owners.index` and the wipe journal. Managers may share it, in one process
    ///     or several: each change of those files is made under a lock (`FILE.lock`, `flock(2)`) from the file
    ///     as it is then, and the index is read again when another manager has changed it.
    ///   - ownerStorage: extended attributes where supported (the default), or the index only.
    ///   - chunkSize: plaintext bytes per encrypted chunk, 1 byte ... 16 MiB; 64 KiB by default.
    ///
    /// A wipe that a crash cut short on the same state directory is finished before the initializer returns
    /// (see ``removeFiles(ownedBy:)``).
    /// - Throws: ``ProtectionError/ioFailure(path:operation:errno:)`` (106) when the state directory cannot be created; ``ProtectionError/insecureDirectory(path:reason:)`` (114) when it belongs to another user, lies below
    ///   a directory another user could write to (as for ``FileKeyStore/init(atPath:)``), or cannot be
    ///   tightened to `0700`; ``ProtectionError/invalidEnvelope(reason:)`` (100) for a chunk size out of range; the
    ///   failure of an interrupted wipe it could not finish.
    public init(
        roots: [String], keyStore: any KeyStore, policy: any ManagedIdentityPolicy, stateDirectory: String,
        ownerStorage: OwnerStorage = .automatic, chunkSize: Int = 64 * 1024
    ) throws(ProtectionError) {
        guard (EncryptedFileFormat.minimumChunkSize...EncryptedFileFormat.maximumChunkSize).contains(chunkSize) else {
            throw .invalidEnvelope(reason: "chunk size \(chunkSize) outside 1...\(EncryptedFileFormat.maximumChunkSize)")
        }
        let state = try POSIX.makePrivateDirectory(Paths.absolute(stateDirectory))
        self.policy = policy
        self.chunkSize = chunkSize
        self.storage = try ProtectedRoots(roots: roots, keyStore: keyStore, stateDirectory: state, ownerStorage: ownerStorage)
    }

    /// The protected roots (absolute paths).
    public var roots: [String] {
        storage.roots
    }

    /// Adds a protected root.
    public func addRoot(_ path: String) {
        storage.addRoot(Paths.absolute(path))
    }

    // MARK: Owners

    /// Sets the owner of the regular file at `path`.
    ///
    /// - Parameters:
    ///   - path: the file.
    ///   - owner: the owner; `nil` means the caller's `IdentityContext.effectiveFileIdentity`, and
    ///     if that is `nil` too, the file's owner is removed.
    ///
    /// When the new owner is managed and the policy requires file encryption, the file is encrypted in place
    /// for it; an encrypted file given to an owner that needs no encryption is decrypted in place; an
    /// encrypted file given to another managed owner is re-encrypted for that owner.
    ///
    /// Giving a file of one account to another is a transfer between them: the caller (its effective file
    /// identity) must be allowed to see the current owner's data, and the policy must allow
    /// ``ProtectedDataAccess/transfer(to:)`` of it to the new owner.
    ///
    /// A file's owner never changes in place: a file given to another owner is written anew (atomically, as
    /// the encryption does), so a ``ProtectedFile`` still open on it keeps the previous owner's content and
    /// never sees what the new owner writes.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file at `path`, ``ProtectionError/invalidIdentity(reason:)`` (104) the unmanaged identity cannot own an encrypted file,
    ///   100...103 a damaged encrypted file, ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused, ``ProtectionError/accessDenied(identity:reader:)`` (108) the transfer is not allowed, ``ProtectionError/accountBlocked(identity:reason:)`` (109) an
    ///   owner is blocked.
    public func protect(atPath path: String, owner: Identity? = nil) throws(ProtectionError) {
        let owner = owner ?? IdentityContext.effectiveFileIdentity
        let path = try target(path)
        let info = try regularFileInfo(path)
        let current = try encryptedHeader(path)
        let previous = try currentOwner(path: path, info: info, header: current)
        try authorizeHandOver(of: previous, to: owner)
        try creating(for: owner) { () throws(ProtectionError) in
            if let owner, requiresEncryption(owner) {
                if current?.owner == owner { return try owners.setOwner(policy.record(ofNewDataOwnedBy: owner), path: path) }
                return try encrypt(path: path, info: info, for: owner)
            }
            guard current != nil || previous.owner != owner else {
                // Protected again for its owner: while the owner is managed, the file is its managed data.
                let record = record(of: owner, carrying: previous)
                if record.isIsolated && !previous.isIsolated { try owners.setOwner(record, path: path) }
                return
            }
            try rewriteInClear(path: path, info: info, for: record(of: owner, carrying: previous))
        }
    }

    /// Writes the plaintext of the file at `path` anew, in the clear, owned as `owner` says (decrypting it, as
    /// a transfer to the owner, when it is encrypted), and forgets the replaced file's index entry.
    private func rewriteInClear(path: String, info: stat, for owner: RecordedOwner) throws(ProtectionError) {
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        if let header = try EncryptedFileFormat.readHeader(fd, path: path) {
            var source = DecryptingSource(try decryptor(fd: fd, path: path, header: header, access: .transfer(to: owner.owner)))
            try writePlaintext(from: &source, to: path, mode: info.st_mode & 0o7777, owner: owner, replacing: info)
        } else {
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(path, "lseek") }
            var source = FileDescriptorSource(fd: fd, path: path)
            try writePlaintext(from: &source, to: path, mode: info.st_mode & 0o7777, owner: owner, replacing: info)
        }
    }

    /// The owner and encryption of the regular file at `path`, or `nil` when it has no owner.
    ///
    /// For an encrypted file the owner named in its header; otherwise the recorded owner.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file at `path` (missing, a directory, a path under a regular file); ``ProtectionError/invalidEnvelope(reason:)`` (100), ``ProtectionError/unsupportedVersion(_:)`` (101)
    ///   or ``ProtectionError/invalidIdentity(reason:)`` (104) for a damaged encrypted-file header; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func protectionInfo(atPath path: String) throws(ProtectionError) -> ProtectionInfo? {
        let path = try target(path)
        let info = try regularFileInfo(path)
        if let header = try encryptedHeader(path) { return header.info }
        guard let owner = try owners.owner(path: path, info: info) else { return nil }
        return ProtectionInfo(owner: owner, isEncrypted: false, keyID: nil, formatVersion: nil)
    }

    /// Whether the regular file at `path` is in the encrypted-file format (it starts with the magic).
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file at `path`; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) it cannot be read.
    public func isFileEncrypted(atPath path: String) throws(ProtectionError) -> Bool {
        let path = try target(path)
        _ = try regularFileInfo(path)
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        let prefix = try POSIX.readUpTo(fd, upTo: EnvelopeFormat.fileMagic.count, path: path)
        return prefix == EnvelopeFormat.fileMagic
    }

    // MARK: Encryption at rest

    /// Encrypts the regular file at `path` in place, atomically, for `owner`, and makes it its owner.
    ///
    /// - Parameters:
    ///   - path: the file.
    ///   - owner: the owner; `nil` means the caller's `IdentityContext.effectiveFileIdentity`.
    ///
    /// A file already encrypted for `owner` is left as it is, unless it is in an earlier encrypted-file
    /// format (version 1), which is rewritten in the current one; one encrypted for another identity is
    /// re-encrypted (authenticated while it is read). A file of another account is a transfer between them
    /// (see ``protect(atPath:owner:)``).
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) the identity is missing, unmanaged or not managed by the policy; ``ProtectionError/fileNotFound(path:)`` (105) no regular file;
    ///   100...103 a damaged encrypted file; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused (the original is then untouched); ``ProtectionError/accessDenied(identity:reader:)`` (108) the
    ///   transfer is not allowed; ``ProtectionError/accountBlocked(identity:reason:)`` (109) an owner is blocked.
    public func encryptFile(atPath path: String, owner: Identity? = nil) throws(ProtectionError) {
        guard let owner = owner ?? IdentityContext.effectiveFileIdentity else {
            throw .invalidIdentity(reason: "no identity to encrypt for: pass one or set a thread or process identity")
        }
        guard isManaged(owner) else {
            throw .invalidIdentity(reason: "\(owner.debugDescription) is not a managed identity; only managed identities have keys")
        }
        let path = try target(path)
        let info = try regularFileInfo(path)
        try authorizeHandOver(of: try currentOwner(path: path, info: info, header: try encryptedHeader(path)), to: owner)
        try creating(for: owner) { () throws(ProtectionError) in try encrypt(path: path, info: info, for: owner) }
    }

    /// ``encryptFile(atPath:owner:)`` once the checks are done.
    private func encrypt(path: String, info: stat, for owner: Identity) throws(ProtectionError) {
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        let existing = try EncryptedFileFormat.readHeader(fd, path: path)
        if let existing, existing.owner == owner, !existing.isLegacy {
            return try owners.setOwner(policy.record(ofNewDataOwnedBy: owner), fd: fd, path: path)
        }
        let key = try keyStore.keyForNewData(of: owner)
        let header = try EncryptedFileFormat.newHeader(owner: owner, key: key, chunkSize: chunkSize)
        // Encrypted for a managed owner: isolated, as the encryption itself records.
        try installCopy(path, mode: info.st_mode & 0o7777, owner: RecordedOwner(owner, isolated: true), replacing: info) { output throws(ProtectionError) in
            if let existing {
                var source = DecryptingSource(try decryptor(fd: fd, path: path, header: existing, access: .transfer(to: owner)))
                try EncryptedFileFormat.encrypt(&source, header: header, key: key, into: output)
            } else {
                guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(path, "lseek") }
                var source = FileDescriptorSource(fd: fd, path: path)
                try EncryptedFileFormat.encrypt(&source, header: header, key: key, into: output)
            }
        }
    }

    /// Decrypts the encrypted file at `path` in place, atomically; the file keeps its owner. A file that is not
    /// encrypted is left as it is.
    ///
    /// Every chunk is authenticated before the decrypted file replaces the original: on any error the
    /// original is untouched and no plaintext is left behind.
    ///
    /// Access: a read of the owner's data and a modification of it (the file is rewritten), asked for a file
    /// in the clear as well (then nothing is rewritten).
    ///
    /// The plaintext is written as a creation of the owner's data: a wipe of the owner
    /// (``removeFiles(ownedBy:)``) either waits for it and deletes the result, or refuses it (103) when it
    /// began, or ran, after the key was fetched.
    /// - Throws: ``ProtectionError/accessDenied(identity:reader:)`` (108) the caller may not read or modify the owner's data; ``ProtectionError/fileNotFound(path:)`` (105) no regular file; ``ProtectionError/invalidEnvelope(reason:)`` (100) malformed or truncated; ``ProtectionError/unsupportedVersion(_:)`` (101) version; ``ProtectionError/authenticationFailed`` (102) tampered, reordered or
    ///   dropped chunk; ``ProtectionError/keyNotFound(identity:keyID:)`` (103) the owner's key is gone, or a wipe of the owner raced the decryption; ``ProtectionError/invalidIdentity(reason:)`` (104) bad owner field; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func decryptFile(atPath path: String) throws(ProtectionError) {
        try decrypt(path: path, access: nil)
    }

    /// ``decryptFile(atPath:)``, asking the policy for `access` (`nil`: a read by the effective file identity).
    private func decrypt(path: String, access: ProtectedDataAccess?) throws(ProtectionError) {
        // Noted before the key is fetched: a wipe of the owner from then on refuses the plaintext's write.
        let since = KeyRevocations.shared.epoch(of: keyStore)
        let path = try target(path)
        let info = try regularFileInfo(path)
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        let header = try EncryptedFileFormat.readHeader(fd, path: path)
        // Decrypting in place rewrites the owner's file: a modification as well as a read. Asked for a file in
        // the clear too, so the answer does not tell a caller who may not touch it whether it is encrypted.
        if access == nil {
            let modify = ProtectedDataAccess.modify(writer: IdentityContext.effectiveFileIdentity)
            if let header {
                // With the key, as every decryption asks (``ManagedIdentityPolicy/authorizedKey(_:to:key:)``).
                _ = try policy.authorizedKey(modify, to: header.recordedOwner) { () throws(ProtectionError) -> ProtectionKey in
                    try keyStore.key(withID: header.keyID, for: header.owner)
                }
            } else {
                try policy.authorize(modify, to: try currentOwner(path: path, info: info, header: nil))
            }
        }
        guard let header else { return }
        var source = DecryptingSource(try decryptor(fd: fd, path: path, header: header, access: access))
        // The plaintext is the owner's data written anew: a creation, so that a wipe of the owner either waits
        // for it and removes it, or refuses it (never a plaintext file back where the wipe deleted one).
        try creating(for: header.owner, since: since) { () throws(ProtectionError) in
            // The plaintext stays isolated: the encryption was the record that its owner was managed.
            try writePlaintext(from: &source, to: path, mode: info.st_mode & 0o7777, owner: header.recordedOwner, replacing: info)
        }
    }

    /// Writes the plaintext of the file at `path` to `copyPath` (the `toPath:` argument; atomically, replacing what is there), and
    /// leaves `path` as it is. The copy is owned by the original's owner, so a wipe of that owner removes it
    /// too, and a wipe of that owner racing the copy either deletes it or refuses it (103), as for
    /// ``decryptFile(atPath:)``. A file that is not encrypted is copied as it is.
    ///
    /// Access: reading `path` is a read of its owner's data; a file already at `copyPath` is replaced, which
    /// modifies its owner's data and, for another owner, transfers it (as ``writeFile(atPath:contents:)`` over it).
    /// - Throws: as ``decryptFile(atPath:)``; ``ProtectionError/accessDenied(identity:reader:)`` (108) when the file at `copyPath` may not be replaced by the caller;
    ///   ``ProtectionError/ioFailure(path:operation:errno:)`` (106) when `copyPath` cannot be written.
    public func decryptFile(atPath path: String, toPath copyPath: String) throws(ProtectionError) {
        // Noted before the key is fetched: a wipe of the owner from then on refuses the copy (see `decrypt`).
        let since = KeyRevocations.shared.epoch(of: keyStore)
        let path = try target(path)
        let copyPath = try target(copyPath)
        let info = try regularFileInfo(path)
        let existing = try destinationInfo(copyPath)
        if let existing, !POSIX.isRegular(existing) {
            throw .fileNotFound(path: copyPath)
        }
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        let mode = info.st_mode & 0o7777
        let header = try EncryptedFileFormat.readHeader(fd, path: path)
        // The copy is recorded as the original is: an isolated original gives an isolated copy.
        let owner = try currentOwner(path: path, info: info, header: header)
        if let existing {
            // Replacing the file at `copyPath` modifies its owner's data and gives the path to `owner`.
            try authorizeHandOver(of: try currentOwner(path: copyPath, info: existing, header: try encryptedHeader(copyPath)), to: owner.owner)
        }
        if let header {
            var source = DecryptingSource(try decryptor(fd: fd, path: path, header: header))
            // The copy is the owner's data: a creation, waited for or refused by a wipe of the owner.
            return try creating(for: header.owner, since: since) { () throws(ProtectionError) in
                try writePlaintext(from: &source, to: copyPath, mode: mode, owner: header.recordedOwner, replacing: existing)
            }
        }
        try policy.authorize(.read(reader: IdentityContext.effectiveFileIdentity), to: owner)
        guard lseek(fd, 0, SEEK_SET) == 0 else { throw POSIX.failure(path, "lseek") }
        var source = FileDescriptorSource(fd: fd, path: path)
        try creating(for: owner.owner, since: since) { () throws(ProtectionError) in
            // The copy is new data: isolated when its owner is managed now, as well as when the original is.
            try writePlaintext(
                from: &source, to: copyPath, mode: mode, owner: record(of: owner.owner, carrying: owner), replacing: existing)
        }
    }

    // MARK: Internals

    /// The file a path given to a file API names: absolute, with symbolic links resolved, so that the access
    /// checks, the owner records and the write are all about the same file (a link is never replaced
    /// itself: writing through it writes the file it points to). A path that does not exist yet resolves
    /// through its directory.
    /// - Throws: ``ProtectionError/reservedPath(path:)`` (116) the path lies in the state directory, a directory
    ///   the key store declares, or the directory of any `FileKeyStore` of the process; ``ProtectionError/fileNotFound(path:)`` (105) a link that
    ///   points nowhere.
    func target(_ path: String) throws(ProtectionError) -> String {
        let absolute = Paths.absolute(path)
        let resolved: String
        if let real = POSIX.realPath(absolute) {
            resolved = real
        } else if (try? POSIX.lstatPath(absolute)) != nil {
            // (`try?`: a path that cannot even be looked at is resolved through its directory below, and the
            // operation on it then fails with the OS's own refusal; nothing is decided from this answer.)
            throw .fileNotFound(path: absolute)   // a dangling symbolic link
        } else if let parent = POSIX.realPath(Paths.parent(absolute)) {
            resolved = Paths.join(parent, Paths.lastComponent(absolute))
        } else {
            resolved = absolute   // no such directory: the operation itself fails (105 or 106)
        }
        if storage.isReserved(resolved) { throw .reservedPath(path: absolute) }
        return resolved
    }


    func isManaged(_ identity: Identity) -> Bool {
        !identity.isUnmanaged && policy.isManaged(identity)
    }

    /// The checks before existing data of `previousOwner` is replaced, truncated, re-encrypted or given to
    /// `newOwner`: that modifies it, so the caller must be allowed to modify the previous owner's data
    /// (``ProtectedDataAccess/modify(writer:)``) whether or not the owner changes, and when it changes the data
    /// must be allowed to go to the new owner (``ProtectedDataAccess/transfer(to:)``). The owner a caller names
    /// for the result never widens this: it is checked against the data's recorded owner. Nothing to check
    /// when there was no owner.
    func authorizeHandOver(of previous: RecordedOwner, to newOwner: Identity?) throws(ProtectionError) {
        guard previous.owner != nil else { return }
        try policy.authorize(.modify(writer: IdentityContext.effectiveFileIdentity), to: previous)
        guard previous.owner != newOwner else { return }
        try policy.authorize(.transfer(to: newOwner), to: previous)
    }

    /// The recorded owner of the regular file at `path`: the one in its encrypted-file `header` (isolated),
    /// else the one its owner record names, isolated as the record says.
    ///
    /// A plain file's record without the isolation marker (written before isolation was recorded, or while
    /// its owner was not managed) whose owner is managed now is read as isolated, and the marker is written
    /// then, so that the file stays isolated after its owner stops being managed: an owner's data is never
    /// silently downgraded.
    func currentOwner(path: String, info: stat, header: EncryptedFileFormat.Header?) throws(ProtectionError) -> RecordedOwner {
        if let header { return header.recordedOwner }
        let record = try owners.record(path: path, info: info)
        guard let owner = record.owner, record.isLegacy, isManaged(owner) else { return record }
        do throws(ProtectionError) {
            try owners.recordIsolation(of: owner, path: path, info: info)
        } catch {
            // Safe to drop: this access is decided as isolated either way (its owner is managed now, so its
            // policy decides), and the next access while the owner is managed writes the marker again. What
            // is lost is only the early record for a withdrawal that happens before any such access succeeds
            // (a read-only file system, a file the process may read but not change).
        }
        return RecordedOwner(owner, isolated: true)
    }

    /// The record of data that was recorded as `previous` and is written anew for `owner`: isolated when
    /// `owner` is managed now, and when the data stays its isolated owner's (never downgraded by a rewrite).
    func record(of owner: Identity?, carrying previous: RecordedOwner) -> RecordedOwner {
        let fresh = policy.record(ofNewDataOwnedBy: owner)
        return RecordedOwner(owner, isolated: fresh.isIsolated || (previous.isIsolated && previous.owner == owner))
    }

    func requiresEncryption(_ identity: Identity) -> Bool {
        isManaged(identity) && policy.isFileEncryptionRequired(for: identity)
    }

    /// `stat` of a regular file, following symbolic links, or ``ProtectionError/fileNotFound(path:)`` (105).
    func regularFileInfo(_ path: String) throws(ProtectionError) -> stat {
        guard let info = try POSIX.statPath(path), POSIX.isRegular(info) else { throw .fileNotFound(path: path) }
        return info
    }

    /// `stat` of what is at a path about to be written, `nil` when nothing is (including a path under a
    /// regular file: the write itself then fails with ``ProtectionError/ioFailure(path:operation:errno:)`` (106)).
    func destinationInfo(_ path: String) throws(ProtectionError) -> stat? {
        do throws(ProtectionError) {
            return try POSIX.statPath(path)
        } catch .fileNotFound {
            return nil
        }
    }

    func encryptedHeader(_ path: String) throws(ProtectionError) -> EncryptedFileFormat.Header? {
        try EncryptedFileFormat.header(atPath: path)
    }

    /// The one way to decrypt a file: the policy must allow `access` to the owner's data (`nil`: a read by
    /// the caller's effective file identity).
    func decryptor(
        fd: Int32, path: String, header: EncryptedFileFormat.Header, access: ProtectedDataAccess? = nil
    ) throws(ProtectionError) -> EncryptedFileFormat.Decryptor {
        let key = try policy.authorizedKey(access ?? .read(reader: IdentityContext.effectiveFileIdentity), to: header.recordedOwner) {
            () throws(ProtectionError) -> ProtectionKey in try keyStore.key(withID: header.keyID, for: header.owner)
        }
        return try EncryptedFileFormat.Decryptor(fd: fd, path: path, header: header, key: key)
    }

    /// Copies everything `source` yields into `destination` atomically (temporary file, fsync, rename),
    /// owned as `owner` records; on any error the destination is left as it was.
    ///
    /// - Parameter replaced: `stat` of the file at `destination` that the copy replaces, `nil` when there was
    ///   none. Its owner-index entry goes once the copy is in place (asked of every caller, so none forgets
    ///   it): its inode may be reused by a file nobody owns, which would inherit the owner.
    func writePlaintext(
        from source: inout some PlaintextSource, to destination: String, mode: mode_t, owner: RecordedOwner,
        replacing replaced: stat?
    ) throws(ProtectionError) {
        let pieceSize = 1 << 16
        try installCopy(destination, mode: mode, owner: owner, replacing: replaced) { output throws(ProtectionError) in
            while true {
                let piece = try source.read(upTo: pieceSize)
                try output.write(piece)
                if piece.count < pieceSize { break }
            }
        }
    }

    /// Writes the file that takes `destination`'s name, owned by `owner`, under a temporary name (``AtomicFile``):
    /// `body` writes its content, then it is `fsync`ed and takes `destination`'s name, the owner index forgets
    /// `replaced` (the file it replaces, whose inode a file nobody owns may reuse), and the directory is
    /// `fsync`ed. Every atomic write of a whole file goes through here.
    ///
    /// With `replaced`, the new file is renamed over `destination`, once the file there is seen to be still
    /// `replaced` (the one the caller checked): it is held open from then until its entry is forgotten, so its
    /// inode cannot be reused by another file meanwhile. Without (the caller found nothing there and checked its
    /// access for that), it is linked to the name, which fails when a file took it since. Either way a file the
    /// caller's check was not about stays, and this returns `false` with nothing written.
    ///
    /// A failure before the new file has the name leaves `destination` and the index as they were (the
    /// temporary file and its owner record go). A failure after it (the index, the directory's `fsync`) is
    /// thrown with the new file in place, its owner recorded: nothing is undone that another reader could
    /// already see.
    /// - Returns: whether the new file took the name.
    func installAtomically(
        _ destination: String, mode: mode_t, owner: RecordedOwner, replacing replaced: stat?,
        _ body: (AtomicFile) throws(ProtectionError) -> Void
    ) throws(ProtectionError) -> Bool {
        var output = try AtomicFile(replacing: destination, mode: mode)
        var held: Int32?
        defer { if let held { POSIX.closeFile(held) } }
        do throws(ProtectionError) {
            try owners.setOwner(owner, fd: output.fd, path: output.temporaryPath)
            try body(output)
            if let replaced {
                held = Self.holdIfStill(replaced, at: destination)
                guard held != nil else {
                    owners.forgetRemoved(fd: output.fd, path: output.temporaryPath)
                    output.discard()
                    return false
                }
            }
            guard try output.commit(replacing: replaced != nil) else {
                owners.forgetRemoved(fd: output.fd, path: output.temporaryPath)
                output.discard()
                return false
            }
        } catch {
            // Before the new file has the name: the descriptor is still the temporary file's.
            owners.forgetRemoved(fd: output.fd, path: output.temporaryPath)
            output.discard()
            throw error
        }
        if let replaced { try owners.forget([replaced]) }
        try output.syncDirectory()
        return true
    }

    /// A descriptor of the file at `path` when it is the file `checked` describes, else `nil`: same device, inode,
    /// type and modification time (an inode freed since the check and reused by a new file has the new file's
    /// time), not following a symbolic link, not waiting on a FIFO.
    private static func holdIfStill(_ checked: stat, at path: String) -> Int32? {
        // (`try?`: a name that cannot be opened or examined, whatever the reason, is not known to hold the checked
        // file, so the write refuses or decides again: nothing is written over it.)
        guard let fd = try? POSIX.openFile(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC) else { return nil }
        guard let now = try? POSIX.fstatFD(fd, path: path), Self.sameFile(now, checked) else {
            POSIX.closeFile(fd)
            return nil
        }
        return fd
    }

    private static func sameFile(_ a: stat, _ b: stat) -> Bool {
        #if canImport(Darwin)
        let (ta, tb) = (a.st_mtimespec, b.st_mtimespec)
        #else
        let (ta, tb) = (a.st_mtim, b.st_mtim)
        #endif
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_mode & S_IFMT == b.st_mode & S_IFMT
            && ta.tv_sec == tb.tv_sec && ta.tv_nsec == tb.tv_nsec
    }

    /// ``installAtomically(_:mode:owner:replacing:_:)`` for a copy whose destination was checked once: a file
    /// that took the destination's name since is refused (``ProtectionError/ioFailure(path:operation:errno:)``,
    /// `EEXIST`) and left as it is.
    func installCopy(
        _ destination: String, mode: mode_t, owner: RecordedOwner, replacing replaced: stat?,
        _ body: (AtomicFile) throws(ProtectionError) -> Void
    ) throws(ProtectionError) {
        guard try installAtomically(destination, mode: mode, owner: owner, replacing: replaced, body) else {
            throw .ioFailure(path: destination, operation: "create (a file took the name since it was checked)", errno: EEXIST)
        }
    }
}
