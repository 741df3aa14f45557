import Foundation
import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension FileProtectionManager {
    /// The administrative release: lifts the recorded isolation of the regular file at `path`, whose owner is
    /// no longer managed, so that the file is that owner's unmanaged data again (readable by all, as the
    /// access matrix says for unmanaged data).
    ///
    /// Data created while its owner was managed is recorded isolated (<doc:DataAndFileProtection#Recorded-isolation>):
    /// after the owner stops being managed (its policy document deleted, its tenant's removed, unenrolled
    /// without a wipe) only the owner reads, modifies or transfers it. A wipe removes such data; this release
    /// is the other way out, one file at a time.
    ///
    /// - A plain file: its owner record loses the isolation marker; the content is not touched.
    /// - An encrypted file: decrypted in place, atomically, and authenticated while it is read (its encryption
    ///   is the record of its isolation); it keeps its owner and its permission bits. A failure leaves it as
    ///   it was.
    /// - A file that is not isolated, or that has no owner: nothing changes.
    ///
    /// > Warning: This is an administrator's decision, not an access path: it asks for no caller identity.
    /// > Call it from an operator's tool (a maintenance command, an administrative endpoint behind its own
    /// > authorization) after deciding that the departed account's data may be shared, never from code that
    /// > serves an account's requests. To hand an isolated file to another account instead, let its owner
    /// > read it and write a copy for the other account; to destroy it, wipe the account.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file at `path`;
    ///   ``ProtectionError/accessDenied(identity:reader:)`` (108) the owner is managed now (its policy isolates
    ///   its data; stop managing it first); the policy's refusal for the owner
    ///   (``ProtectionError/accountBlocked(identity:reason:)`` (109), ``ProtectionError/policyUnavailable(reason:)`` (115));
    ///   100...104 a damaged encrypted file or a missing key (a wiped account's); ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func releaseIsolation(atPath path: String) throws(ProtectionError) {
        let path = try target(path)
        let info = try regularFileInfo(path)
        let header = try encryptedHeader(path)
        // The record as it stands, not upgraded: a managed owner is refused below anyway.
        let record: RecordedOwner
        if let header { record = header.recordedOwner } else { record = try owners.record(path: path, info: info) }
        guard let owner = record.owner, !owner.isUnmanaged else { return }
        if let refusal = policy.refusal(of: .create, to: owner) { throw refusal }
        guard !isManaged(owner) else {
            throw .accessDenied(identity: owner, reader: IdentityContext.effectiveFileIdentity)
        }
        guard record.isIsolated else { return }
        let released = RecordedOwner(owner, isolated: false)
        guard let header else { return try owners.setOwner(released, path: path) }
        try creating(for: owner) { () throws(ProtectionError) in
            let fd = try POSIX.openFile(path, O_RDONLY)
            defer { POSIX.closeFile(fd) }
            // Read as the owner: the release is the administrator's, not a reader's (see the warning above).
            var source = DecryptingSource(try decryptor(fd: fd, path: path, header: header, access: .read(reader: owner)))
            try writePlaintext(from: &source, to: path, mode: info.st_mode & 0o7777, owner: released, replacing: info)
        }
    }

    /// Whether the regular file at `path` is isolated: created while its owner was managed (an encrypted file
    /// always is; a plain file when its owner record says so), or owned by an account managed now. Such a file
    /// is read, modified and transferred only as its owner's policy allows while the owner is managed, and
    /// only by its owner once it is not, until a wipe or ``releaseIsolation(atPath:)``. `false` for a file
    /// without an owner. Reads the records only; changes nothing.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no regular file at `path`; 100, 101, 104 a damaged
    ///   header or owner record; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func isIsolated(atPath path: String) throws(ProtectionError) -> Bool {
        let path = try target(path)
        let info = try regularFileInfo(path)
        if try encryptedHeader(path) != nil { return true }
        let record = try owners.record(path: path, info: info)
        guard let owner = record.owner, !owner.isUnmanaged else { return false }
        return record.isIsolated || isManaged(owner)
    }

    /// ``isIsolated(atPath:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``isIsolated(atPath:)``.
    public func isIsolated(at url: URL) throws(ProtectionError) -> Bool {
        try isIsolated(atPath: try url.protectionFilePath())
    }

    /// ``releaseIsolation(atPath:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``releaseIsolation(atPath:)``.
    public func releaseIsolation(at url: URL) throws(ProtectionError) {
        try releaseIsolation(atPath: try url.protectionFilePath())
    }

    /// The record of the plain file open as `fd`, whose owner `recorded` names, for a handle that writes
    /// into it (a ``ProtectedFile`` or a `FileHandle` from ``openFile(atPath:options:permissions:)``): what
    /// the handle writes is written while its owner is managed, so when the owner is managed now the file is
    /// recorded isolated from then on, also after the owner stops being managed (never downgraded by a later
    /// withdrawal). Called last in an open, once it can no longer fail for another reason.
    func recordIsolation(ofWritesTo recorded: RecordedOwner, fd: Int32, path: String) throws(ProtectionError) -> RecordedOwner {
        guard let owner = recorded.owner, !recorded.isIsolated, isManaged(owner) else { return recorded }
        try owners.recordIsolation(of: owner, fd: fd, path: path)
        return RecordedOwner(owner, isolated: true)
    }
}
