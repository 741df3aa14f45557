import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads and writes file owners: the extended attribute, or the index (see ``OwnerStorage``).
struct FileOwnerStore: Sendable {
    /// The extended attribute holding a file's owner as UTF-8 (empty: the unmanaged identity).
    static let attributeName = "user.identityruntime.owner"

    let storage: OwnerStorage
    let index: OwnerIndex

    /// Records `owner` on the open file `fd` (`nil`: removes it). Works on a temporary file before it is
    /// renamed into place: the attribute and the inode move with it.
    func setOwner(_ owner: Identity?, fd: Int32, path: String) throws(ProtectionError) {
        let info = try POSIX.fstatFD(fd, path: path)
        if storage == .automatic {
            if let owner {
                if try POSIX.setXattr(fd: fd, path: path, FileOwnerStore.attributeName, Array(owner.name.utf8)) {
                    try index.set(nil, for: info, path: path)
                    return
                }
            } else {
                try POSIX.removeXattr(fd: fd, path: path, FileOwnerStore.attributeName)
            }
        }
        try index.set(owner, for: info, path: path)
    }

    /// Records `owner` on the file at `path` (following symbolic links).
    func setOwner(_ owner: Identity?, path: String) throws(ProtectionError) {
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        try setOwner(owner, fd: fd, path: path)
    }

    /// The recorded owner of the file at `path` whose `stat` is `info`, or `nil`.
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) when the recorded value is not a valid identity.
    func owner(path: String, info: stat) throws(ProtectionError) -> Identity? {
        if storage == .automatic {
            switch try POSIX.getXattr(path, FileOwnerStore.attributeName) {
            case let .value(bytes):
                return try withRawBytes(of: bytes) { (raw: UnsafeRawBufferPointer) throws(ProtectionError) -> Identity in
                    try EnvelopeFormat.decodeOwner(raw)
                }
            case .absent, .unsupported:
                break
            }
        }
        guard let name = try index.owner(of: info) else { return nil }
        do {
            return try Identity(validating: name)
        } catch {
            throw .invalidIdentity(reason: "owner index entry for \(path): \(error)")
        }
    }

    /// Forgets index entries of files that are gone or replaced.
    func forget(_ infos: [stat]) throws(ProtectionError) {
        try index.remove(infos)
    }

    /// Forgets the index entry of the open file `fd`, which is about to be removed (a temporary file discarded,
    /// a file created for an operation that failed): its inode may be reused by a file nobody owns.
    func forgetRemoved(fd: Int32, path: String) {
        guard let info = try? POSIX.fstatFD(fd, path: path) else { return }
        try? index.remove([info])
    }
}
