import Foundation
import IdentityRuntime

/// A file opened for random-access reads and writes, encrypted at rest in authenticated chunks when its
/// owner's policy requires it, and in the clear otherwise (the analog of the Intune App SDK's
/// `IntuneMAMFile`).
///
/// ```swift
/// let file = try files.openProtectedFile(atPath: "/var/lib/app/documents/ledger.db",
///                                        options: [.read, .write, .create])   // owner: the effective
/// defer { try? file.close() }                                                  // file identity
/// try file.write(header, at: 0)
/// try file.write(entry)                  // at the current offset, which moves past it
/// let page = try file.read(at: 4096, upToCount: 4096)
/// try file.synchronize()                 // durable from here on, even across a power loss
/// ```
///
/// ## Owner and encryption
/// A file created, or opened with ``FileOpenOptions/truncate``, gets the owner passed to the initializer, or
/// else the caller's thread identity, or else the owner of the directory it is created in, or else the process
/// identity (the precedence is spelled out at ``FileProtectionManager/protectDirectory(atPath:owner:)``). When that owner is managed and its policy
/// requires file encryption, the file is written in the encrypted-file format (the same format
/// ``FileProtectionManager/encryptFile(atPath:owner:)`` writes, so each reads the other's files); otherwise it is
/// a plain file with the owner recorded. An existing encrypted file stays encrypted. An existing plain file
/// whose owner requires encryption is encrypted in place (atomically) before a handle that writes is handed
/// out; a plaintext handle is never handed out for such a file.
///
/// Every open goes through the policy's access check: creating or truncating is refused when the owner may not
/// get new data, opening an existing file is refused when the caller's effective file identity may not read
/// the owner's data, or may not modify it for a handle that writes (``ManagedIdentityPolicy/refusal(of:to:)``),
/// before any byte is read.
///
/// Nothing changes before everything is decided: an open that creates or truncates has the decision, the
/// owner and the key before it touches the file, and builds the new (or emptied) file under a temporary name,
/// owner record and header included, before it takes the path in one step (`rename(2)`, or `link(2)` for a
/// new file). A refusal, a key store that does not answer in time, a cancelled `async` open or a crash leaves
/// the file and its owner as they were. Truncation therefore replaces the file: other descriptors on the old
/// one, and hard links to it, keep the old content.
///
/// Creating or truncating a file for another owner than the caller is refused, too, unless the caller may
/// read that owner's data (for a handle that writes: modify it): the handle would read what the owner writes
/// into the file later.
///
/// The handle stays under the gate after it is opened: every read asks the policy for a read of the owner's
/// data by the identity that opened the handle (``opener``), every write and truncation for a modification,
/// whichever thread or task uses the handle. So a handle stops working (the policy's refusal:
/// ``ProtectionError/accountBlocked(identity:reason:)`` (109) a blocked owner, ``ProtectionError/accessDenied(identity:reader:)`` (108) a blocked
/// opener, ``ProtectionError/policyUnavailable(reason:)`` (115) the policy is not loaded) as soon as its owner or its opener is blocked, or the policy changes so
/// that the access is no longer allowed; it works again when the refusal clears. A wipe is different: once the
/// owner's keys are destroyed (``FileProtectionManager/removeFiles(ownedBy:)``, `PolicyManager.wipeData`,
/// ``FileKeyStore/destroyKeys(for:)``), every operation but ``close()`` and ``offset`` is refused with
/// ``ProtectionError/keyNotFound(identity:keyID:)`` (103), the handle drops its descriptor and key, and it
/// never works again, whatever happens to the account afterwards. A file's owner never changes
/// under an open handle: ``FileProtectionManager/protect(atPath:owner:)`` writes a file it gives to another
/// owner anew.
///
/// ## Format and integrity
/// Content is stored in chunks of ``FileProtectionManager/chunkSize`` bytes, each sealed with AES-256-GCM
/// under a key derived for this file, with a fresh random nonce on every write, and bound to its file and
/// position. Reading a chunk that was moved from another file or position, a tail cut off, or a chunk torn by a
/// crash is a ``ProtectionError`` (``ProtectionError/invalidEnvelope(reason:)`` (100) or ``ProtectionError/authenticationFailed`` (102)), never wrong bytes. Rewriting a chunk writes the new record into
/// the chunk's other slot, so a crash mid-write leaves its previous content readable.
///
/// ## Durability
/// After ``synchronize()`` returns, everything written before it survives a crash or power loss. After a
/// process crash (SIGKILL) every completed write is kept too; a write in progress leaves each chunk at its old
/// or its new content. See <doc:DataAndFileProtection#Crash-consistency>.
///
/// ## Threads
/// A handle is safe to use from several threads and tasks at once: every operation takes the handle's lock, so
/// operations on one handle run one at a time, each as a whole. ``read(upToCount:)`` and ``write(_:)-(Data)``
/// use and move the shared current offset; ``read(at:upToCount:)`` and ``write(_:at:)-(Data,_)`` do not touch
/// it. Many handles on many files work in parallel. Open a file for writing through one handle at a time: two
/// writing handles on one file do not coordinate.
///
/// Closing is explicit (``close()``); a handle that is deallocated open closes its descriptor.
public final class ProtectedFile: Sendable {
    /// The absolute path the file was opened at.
    public let path: String
    /// The file's owner (`nil`: none).
    public let owner: Identity?
    /// Whether the content is stored encrypted.
    public let isEncrypted: Bool
    /// Whether the handle was opened for writing.
    public let isWritable: Bool
    /// Whether the handle was opened for reading.
    public let isReadable: Bool
    /// Whether every write goes to the end of the file (``FileOpenOptions/append``).
    public let appends: Bool
    /// The effective file identity of the code that opened the handle: every read asks the policy for
    /// ``ProtectedDataAccess/read(reader:)`` by it, every write and truncation for
    /// ``ProtectedDataAccess/modify(writer:)``, to ``owner``'s data.
    public let opener: Identity?

    private let policy: any ManagedIdentityPolicy
    /// Where the file's owner record lives: a write made while the owner is managed records isolation there.
    private let owners: FileOwnerStore
    /// Revoked when the owner's keys are destroyed (`nil`: no owner, nothing to wipe).
    private let revocation: RevocationToken?
    /// The key the content is encrypted with, named in the refusal of a handle whose keys were destroyed.
    private let keyID: ProtectionKeyID?

    private struct State: Sendable {
        var fd: Int32?
        var store: EncryptedChunkStore?
        var offset: UInt64 = 0
        /// ``owner`` as the file records it, with its isolation: what every later access is decided on. A
        /// write while the owner is managed makes it isolated.
        var recordedOwner: RecordedOwner
    }

    private let state: LockedValue<State>

    /// Opens or creates the file at `path` through `manager` (see ``FileProtectionManager/openProtectedFile(atPath:options:owner:permissions:)``).
    public convenience init(
        atPath path: String, options: FileOpenOptions = [.read, .write], owner: Identity? = nil,
        permissions: UInt16 = 0o600, manager: FileProtectionManager
    ) throws(ProtectionError) {
        let opened = try ProtectedFile.open(manager: manager, path: try manager.target(path), options: options, owner: owner, permissions: permissions)
        self.init(opened, policy: manager.policy, owners: manager.owners, options: options)
    }

    private init(_ opened: Opened, policy: any ManagedIdentityPolicy, owners: FileOwnerStore, options: FileOpenOptions) {
        let store = opened.store
        self.path = opened.path
        self.owner = opened.owner.owner
        self.opener = opened.opener
        self.policy = policy
        self.owners = owners
        self.isEncrypted = store != nil
        self.isWritable = options.writes
        self.isReadable = options.contains(.read) || !options.writes
        self.appends = options.contains(.append)
        self.revocation = opened.revocation
        self.keyID = store?.header.keyID
        self.state = LockedValue(State(fd: opened.fd, store: store, recordedOwner: opened.owner))
    }

    deinit {
        state.withLock { state in
            if let fd = state.fd { POSIX.closeFile(fd) }
            state.fd = nil
        }
    }

    // MARK: Reading

    /// Reads up to `count` bytes at the current offset and moves the offset past them; fewer only at the end
    /// of the file, none at or past it.
    /// - Throws: ``ProtectionError/fileClosed(path:)`` (111) closed; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) not open for reading or the OS failed; ``ProtectionError/invalidEnvelope(reason:)`` (100) or ``ProtectionError/authenticationFailed`` (102) a damaged or tampered chunk;
    ///   the policy's refusal of the read (``ProtectionError/accountBlocked(identity:reason:)`` (109) a blocked owner
    ///   or opener, ``ProtectionError/accessDenied(identity:reader:)`` (108), ``ProtectionError/policyUnavailable(reason:)`` (115)).
    public func read(upToCount count: Int) throws(ProtectionError) -> [UInt8] {
        try state.withLock { (state: inout State) throws(ProtectionError) -> [UInt8] in
            let bytes = try read(&state, at: state.offset, count: count)
            state.offset += UInt64(bytes.count)
            return bytes
        }
    }

    /// Reads up to `count` bytes at `offset` without moving the current offset (`pread(2)`).
    /// - Throws: as ``read(upToCount:)``.
    public func read(at offset: UInt64, upToCount count: Int) throws(ProtectionError) -> [UInt8] {
        try state.withLock { (state: inout State) throws(ProtectionError) -> [UInt8] in
            try read(&state, at: offset, count: count)
        }
    }

    /// Everything from the current offset to the end, moving the offset to the end.
    public func readToEnd() throws(ProtectionError) -> [UInt8] {
        try state.withLock { (state: inout State) throws(ProtectionError) -> [UInt8] in
            let size = try size(&state)
            guard state.offset < size else { return [] }
            let bytes = try read(&state, at: state.offset, count: Int(size - state.offset))
            state.offset += UInt64(bytes.count)
            return bytes
        }
    }

    // MARK: Writing

    /// Writes `bytes` at the current offset (at the end with ``FileOpenOptions/append``) and moves the offset
    /// past them. Writing past the end fills the gap with zeros.
    /// - Throws: ``ProtectionError/fileClosed(path:)`` (111) closed; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) not open for writing or the OS failed; ``ProtectionError/invalidOffset(path:offset:)`` (112) beyond the format's reach;
    ///   ``ProtectionError/invalidEnvelope(reason:)`` (100) or ``ProtectionError/authenticationFailed`` (102) a damaged chunk that the write only partly covers; the policy's refusal of the modification.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) {
        try state.withLock { (state: inout State) throws(ProtectionError) in
            let offset = appends ? try size(&state) : state.offset
            try write(&state, bytes, at: offset)
            state.offset = offset + UInt64(bytes.count)
        }
    }

    /// Writes `bytes` at the current offset; see ``write(_:)-(UnsafeRawBufferPointer)``.
    public func write(_ bytes: [UInt8]) throws(ProtectionError) {
        try withRawBytes(of: bytes) { (raw) throws(ProtectionError) in try write(raw) }
    }

    /// Writes `data` at the current offset; see ``write(_:)-(UnsafeRawBufferPointer)``.
    public func write(_ data: Data) throws(ProtectionError) {
        try withRawBytes(of: data) { (raw) throws(ProtectionError) in try write(raw) }
    }

    /// Writes `bytes` at `offset` without moving the current offset (`pwrite(2)`; with
    /// ``FileOpenOptions/append`` too). Writing past the end fills the gap with zeros.
    /// - Throws: as ``write(_:)-(UnsafeRawBufferPointer)``.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(ProtectionError) {
        try state.withLock { (state: inout State) throws(ProtectionError) in
            try write(&state, bytes, at: offset)
        }
    }

    /// Writes `bytes` at `offset`; see ``write(_:at:)-(UnsafeRawBufferPointer,_)``.
    public func write(_ bytes: [UInt8], at offset: UInt64) throws(ProtectionError) {
        try withRawBytes(of: bytes) { (raw) throws(ProtectionError) in try write(raw, at: offset) }
    }

    /// Writes `data` at `offset`; see ``write(_:at:)-(UnsafeRawBufferPointer,_)``.
    public func write(_ data: Data, at offset: UInt64) throws(ProtectionError) {
        try withRawBytes(of: data) { (raw) throws(ProtectionError) in try write(raw, at: offset) }
    }

    // MARK: Offset, size, durability

    /// The current offset used by ``read(upToCount:)`` and ``write(_:)-(Data)``.
    public var offset: UInt64 {
        state.withLock { $0.offset }
    }

    /// Moves the current offset; past the end is allowed (a later write fills the gap with zeros).
    /// - Throws: ``ProtectionError/fileClosed(path:)`` (111) closed.
    public func seek(to offset: UInt64) throws(ProtectionError) {
        try state.withLock { (state: inout State) throws(ProtectionError) in
            try ensureKeysLive(&state)
            guard state.fd != nil else { throw .fileClosed(path: path) }
            state.offset = offset
        }
    }

    /// Moves the current offset to the end of the file and returns it.
    /// - Throws: ``ProtectionError/fileClosed(path:)`` (111) closed; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS failed.
    @discardableResult
    public func seekToEnd() throws(ProtectionError) -> UInt64 {
        try state.withLock { (state: inout State) throws(ProtectionError) -> UInt64 in
            state.offset = try size(&state)
            return state.offset
        }
    }

    /// The length of the content in bytes (for an encrypted file, the authenticated plaintext length).
    /// - Throws: ``ProtectionError/fileClosed(path:)`` (111) closed; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS failed.
    public func size() throws(ProtectionError) -> UInt64 {
        try state.withLock { (state: inout State) throws(ProtectionError) -> UInt64 in try size(&state) }
    }

    /// Cuts the content to `length` bytes, or extends it with zeros. The current offset is unchanged.
    /// - Throws: ``ProtectionError/fileClosed(path:)`` (111) closed; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) not open for writing or the OS failed; ``ProtectionError/invalidOffset(path:offset:)`` (112) beyond the format's reach; the
    ///   policy's refusal of the modification.
    public func truncate(to length: UInt64) throws(ProtectionError) {
        try state.withLock { (state: inout State) throws(ProtectionError) in
            let fd = try writableFD(&state)
            if state.store != nil {
                try state.store!.truncate(to: length)
            } else {
                guard length <= UInt64(Int64.max) else { throw .invalidOffset(path: path, offset: length) }
                try POSIX.truncateFD(fd, to: Int64(length), path: path)
            }
        }
    }

    /// Makes every write so far durable (`fsync(2)`).
    /// - Throws: ``ProtectionError/fileClosed(path:)`` (111) closed; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS failed.
    public func synchronize() throws(ProtectionError) {
        try state.withLock { (state: inout State) throws(ProtectionError) in
            try ensureKeysLive(&state)
            guard let fd = state.fd else { throw .fileClosed(path: path) }
            try POSIX.fsyncFD(fd, path: path)
        }
    }

    /// Closes the handle. Writes are not synchronized by closing; call ``synchronize()`` first when they must
    /// be durable. Closing twice is allowed.
    public func close() throws(ProtectionError) {
        state.withLock { state in
            if let fd = state.fd { POSIX.closeFile(fd) }
            state.fd = nil
            state.store = nil
        }
    }

    // MARK: Internals

    /// The policy's answer, now, to a read (or for `writing`, a modification) of the owner's data by the
    /// opener.
    private func authorizeAgain(_ state: State, writing: Bool) throws(ProtectionError) {
        try policy.authorize(writing ? .modify(writer: opener) : .read(reader: opener), to: state.recordedOwner)
    }

    /// Before a write into a plain file: when its owner is managed now (it may not have been at the open), the
    /// file must not take plaintext its policy wants encrypted (``ProtectionError/encryptionRequired(path:)``:
    /// encrypt it and open it again), and what is written is isolated from now on, also after the owner stops
    /// being managed.
    private func recordManagedWrite(_ state: inout State, fd: Int32) throws(ProtectionError) {
        guard state.store == nil, let owner, !owner.isUnmanaged, policy.isManaged(owner) else { return }
        if policy.isFileEncryptionRequired(for: owner) { throw .encryptionRequired(path: path) }
        guard !state.recordedOwner.isIsolated else { return }
        try owners.recordIsolation(of: owner, fd: fd, path: path)
        state.recordedOwner = RecordedOwner(owner, isolated: true)
    }

    /// Refuses, from the moment the owner's keys were destroyed (a wipe), every operation on the handle, and
    /// drops what it holds: the descriptor, the file key, the chunk it last decrypted.
    /// - Throws: ``ProtectionError/keyNotFound(identity:keyID:)`` (103) once the keys are gone.
    private func ensureKeysLive(_ state: inout State) throws(ProtectionError) {
        guard let revocation, let owner, revocation.isRevoked else { return }
        if let fd = state.fd { POSIX.closeFile(fd) }
        state.fd = nil
        state.store = nil
        state.offset = 0
        throw .keyNotFound(identity: owner, keyID: keyID)
    }

    private func read(_ state: inout State, at offset: UInt64, count: Int) throws(ProtectionError) -> [UInt8] {
        try ensureKeysLive(&state)
        guard let fd = state.fd else { throw .fileClosed(path: path) }
        guard isReadable else { throw .ioFailure(path: path, operation: "read (not opened for reading)", errno: EBADF) }
        try authorizeAgain(state, writing: false)
        guard count > 0 else { return [] }
        if state.store != nil {
            var output: [UInt8] = []
            output.reserveCapacity(min(count, 1 << 24))
            try state.store!.read(at: offset, count: count, into: &output)
            return output
        }
        guard offset <= UInt64(Int64.max) else { return [] }
        return try POSIX.preadUpTo(fd, upTo: count, at: Int64(offset), path: path)
    }

    private func write(_ state: inout State, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(ProtectionError) {
        let fd = try writableFD(&state)
        if state.store != nil { return try state.store!.write(bytes, at: offset) }
        let (end, overflow) = offset.addingReportingOverflow(UInt64(bytes.count))
        guard !overflow, end <= UInt64(Int64.max) else { throw .invalidOffset(path: path, offset: offset) }
        try POSIX.pwriteAll(fd, bytes, at: Int64(offset), path: path)
    }

    private func size(_ state: inout State) throws(ProtectionError) -> UInt64 {
        try ensureKeysLive(&state)
        guard let fd = state.fd else { throw .fileClosed(path: path) }
        if let store = state.store { return store.length }
        return UInt64(try POSIX.fstatFD(fd, path: path).st_size)
    }

    /// The descriptor of a handle open for writing, once the policy allowed the write again.
    private func writableFD(_ state: inout State) throws(ProtectionError) -> Int32 {
        try ensureKeysLive(&state)
        guard let fd = state.fd else { throw .fileClosed(path: path) }
        guard isWritable else { throw .ioFailure(path: path, operation: "write (not opened for writing)", errno: EBADF) }
        try authorizeAgain(state, writing: true)
        try recordManagedWrite(&state, fd: fd)
        return fd
    }

    private struct Opened {
        let path: String
        let owner: RecordedOwner
        let fd: Int32
        let store: EncryptedChunkStore?
        let opener: Identity?
        let revocation: RevocationToken?
    }

    private static func open(
        manager: FileProtectionManager, path: String, options: FileOpenOptions, owner explicitOwner: Identity?,
        permissions: UInt16
    ) throws(ProtectionError) -> Opened {
        // Noted before anything is looked at: a wipe of the owner from here on means no handle.
        let since = KeyRevocations.shared.epoch(of: manager.keyStore)
        let writes = options.writes
        // Encrypted writes read the chunks they partly overwrite: a writing handle is always read-write.
        let flags = writes ? O_RDWR : O_RDONLY
        let replaces = options.contains(.create) || options.contains(.truncate)
        let newOwner = replaces ? try manager.ownerForNewFile(at: path, explicit: explicitOwner) : nil
        // The checks come before the file is touched (as for `openFile`): truncating another owner's file
        // hands it to the new owner; reads are checked below, once the header is read.
        let existing = try manager.destinationInfo(path)
        if let existing {
            guard POSIX.isRegular(existing) else { throw .fileNotFound(path: path) }
            if options.contains(.create) && options.contains(.exclusive) {
                throw .ioFailure(path: path, operation: "open", errno: EEXIST)
            }
            if options.contains(.truncate) {
                let owner = try manager.currentOwner(path: path, info: existing, header: try manager.encryptedHeader(path))
                try manager.authorizeHandOver(of: owner, to: newOwner)
            }
        } else if !options.contains(.create) {
            throw .fileNotFound(path: path)
        }
        guard existing == nil || options.contains(.truncate) else {
            return try openExisting(manager: manager, path: path, flags: flags, options: options, permissions: permissions, writes: writes, since: since)
        }
        // A handle on a file of another owner reads (or writes) that owner's data from then on.
        let caller = IdentityContext.effectiveFileIdentity
        let record = manager.policy.record(ofNewDataOwnedBy: newOwner)
        try manager.policy.authorize(writes ? .modify(writer: caller) : .read(reader: caller), to: record)
        return try manager.creating(for: newOwner) { () throws(ProtectionError) -> Opened in
            // Everything the new file needs comes before anything changes: the key (a store that does not
            // answer in time, or a cancelled asynchronous call, ends the open here, with the file as it was)
            // and the header sealed with it.
            var sealing: (key: ProtectionKey, header: EncryptedFileFormat.Header)?
            if let newOwner, manager.requiresEncryption(newOwner) {
                let key = try manager.keyStore.keyForNewData(of: newOwner)
                sealing = (key, try EncryptedFileFormat.newHeader(owner: newOwner, key: key, chunkSize: manager.chunkSize))
            }
            // The new (or emptied) file is made whole under a temporary name, owner and header included, and
            // takes the path in one step: a failure or a crash before that leaves the old file and its owner.
            var store: EncryptedChunkStore?
            let installed = try AtomicFile.install(
                at: path, flags: flags, mode: existing.map { $0.st_mode & 0o7777 } ?? mode_t(permissions),
                exactMode: existing != nil, replacing: existing != nil, owners: manager.owners
            ) { (fd, temporaryPath) throws(ProtectionError) in
                try manager.owners.setOwner(record, fd: fd, path: temporaryPath)
                if let sealing {
                    store = try EncryptedChunkStore(creating: fd, path: path, header: sealing.header, key: sealing.key)
                }
            }
            guard let fd = installed else {
                // A file appeared since it was looked at: open it as an existing file (its own checks), or
                // refuse it for an exclusive creation.
                if options.contains(.exclusive) { throw .ioFailure(path: path, operation: "open", errno: EEXIST) }
                return try open(manager: manager, path: path, options: options.subtracting(.create), owner: explicitOwner, permissions: permissions)
            }
            do throws(ProtectionError) {
                // The replaced file's index entry goes with it: its inode may be reused by a file nobody owns.
                if let existing { try manager.owners.forget([existing]) }
                let revocation = try newOwner.map { (owner) throws(ProtectionError) in
                    try KeyRevocations.shared.token(for: owner, in: manager.keyStore, since: since, key: sealing?.key)
                }
                return Opened(path: path, owner: record, fd: fd, store: store, opener: caller, revocation: revocation)
            } catch {
                // The owner was wiped meanwhile (the wipe, which waited for this creation, removes the file),
                // or the index could not be written: no handle.
                POSIX.closeFile(fd)
                throw error
            }
        }
    }

    /// Opens an existing file without truncating it: nothing about it changes; reads and writes are checked
    /// here, once the owner is known. `knownKey`: a key already fetched for the file (after it was encrypted
    /// here), used instead of asking the key store again.
    private static func openExisting(
        manager: FileProtectionManager, path: String, flags: Int32, options: FileOpenOptions, permissions: UInt16,
        writes: Bool, since: UInt64, knownKey: ProtectionKey? = nil
    ) throws(ProtectionError) -> Opened {
        let fd = try POSIX.openFile(path, flags)
        var closed = false
        // The token of the owner's keys: refused when a wipe of the owner began since the open did (the file
        // itself may already be gone from its directory, its key destroyed after it was fetched).
        func revocation(_ owner: Identity?, key: ProtectionKey? = nil) throws(ProtectionError) -> RevocationToken? {
            try owner.map { (owner) throws(ProtectionError) in
                try KeyRevocations.shared.token(for: owner, in: manager.keyStore, since: since, key: key)
            }
        }
        do throws(ProtectionError) {
            let info = try POSIX.fstatFD(fd, path: path)
            guard POSIX.isRegular(info) else { throw ProtectionError.fileNotFound(path: path) }
            let caller = IdentityContext.effectiveFileIdentity
            // A writing handle modifies the owner's data; a reading one hands out its plaintext.
            let access: ProtectedDataAccess = writes ? .modify(writer: caller) : .read(reader: caller)
            if let header = try EncryptedFileFormat.readHeader(fd, path: path) {
                let key = try manager.policy.authorizedKey(access, to: header.recordedOwner) { () throws(ProtectionError) -> ProtectionKey in
                    if let knownKey, knownKey.id == header.keyID { return knownKey }
                    return try manager.keyStore.key(withID: header.keyID, for: header.owner)
                }
                if writes && header.isLegacy {
                    // A file of an earlier format is written in the current one: re-encrypt it first.
                    POSIX.closeFile(fd)
                    closed = true
                    // The current key before the file changes, and the open with it (as for a plain file below).
                    let current = try manager.keyStore.keyForNewData(of: header.owner)
                    try manager.encryptFile(atPath: path, owner: header.owner)
                    return try openExisting(
                        manager: manager, path: path, flags: flags, options: options.subtracting([.create, .truncate, .exclusive]),
                        permissions: permissions, writes: writes, since: since, knownKey: current)
                }
                let store = try EncryptedChunkStore(opening: fd, path: path, header: header, key: key, writable: writes)
                return Opened(path: path, owner: header.recordedOwner, fd: fd, store: store, opener: caller, revocation: try revocation(header.owner, key: key))
            }
            var recorded = try manager.currentOwner(path: path, info: info, header: nil)
            try manager.policy.authorize(access, to: recorded)
            let owner = recorded.owner
            if writes, let owner, manager.requiresEncryption(owner) {
                // Never a plaintext handle that writes a file that must be encrypted: encrypt it first (the
                // encryption records it isolated). The key comes before the file or its record changes, and the
                // handle opens with that key: a store that stops answering in between cannot leave the file
                // encrypted, or recorded isolated, with the open refused.
                let key = try manager.keyStore.keyForNewData(of: owner)
                POSIX.closeFile(fd)
                closed = true
                try manager.encryptFile(atPath: path, owner: owner)
                return try openExisting(
                    manager: manager, path: path, flags: flags, options: options.subtracting([.create, .truncate, .exclusive]),
                    permissions: permissions, writes: writes, since: since, knownKey: key)
            }
            let token = try revocation(owner)
            if writes {
                // Recorded last, once the open can no longer fail for another reason: a refused open leaves
                // the record as it was.
                recorded = try manager.recordIsolation(ofWritesTo: recorded, fd: fd, path: path)
            }
            return Opened(path: path, owner: recorded, fd: fd, store: nil, opener: caller, revocation: token)
        } catch {
            if !closed { POSIX.closeFile(fd) }
            throw error
        }
    }
}

extension FileOpenOptions {
    /// Whether a handle opened with these options writes.
    var writes: Bool {
        contains(.write) || contains(.truncate) || contains(.append)
    }
}

extension FileProtectionManager {
    /// Opens or creates the file at `path` as a ``ProtectedFile``: random-access reads and writes, encrypted
    /// at rest in authenticated chunks when the owner's policy requires it.
    ///
    /// - Parameters:
    ///   - path: the file.
    ///   - options: ``FileOpenOptions/read``, ``FileOpenOptions/write``, ``FileOpenOptions/create``,
    ///     ``FileOpenOptions/truncate``, ``FileOpenOptions/exclusive``, ``FileOpenOptions/append``.
    ///   - owner: the owner of a file this call creates or truncates; `nil` means the caller's thread
    ///     identity, else the enclosing directory's owner, else the process identity (see
    ///     ``protectDirectory(atPath:owner:)``). Ignored when an existing file is opened without truncation.
    ///   - permissions: mode bits of a newly created file (before the process umask).
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) missing (without ``FileOpenOptions/create``) or not a regular file; the policy's refusal
    ///   (for example ``ProtectionError/accessDenied(identity:reader:)`` (108)) for an owner the caller may not create or read data for; 100...104
    ///   a damaged encrypted file or a missing key; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func openProtectedFile(
        atPath path: String, options: FileOpenOptions = [.read, .write], owner: Identity? = nil,
        permissions: UInt16 = 0o600
    ) throws(ProtectionError) -> ProtectedFile {
        try ProtectedFile(atPath: path, options: options, owner: owner, permissions: permissions, manager: self)
    }
}
