import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads and writes file owners: the extended attribute, or the index (see ``OwnerStorage``), and with each
/// owner whether the file is isolated (``RecordedOwner``).
struct FileOwnerStore: Sendable {
    /// The extended attribute holding a file's owner as UTF-8 (empty: the unmanaged identity).
    static let attributeName = "user.identityruntime.owner"
    /// The extended attribute recording that a file was created while its owner was managed: it holds that
    /// owner's name as UTF-8, and counts only while it names the owner the file has (a file re-owned by a
    /// crashed write keeps a marker that names someone else, which counts for nothing). A value that is not a
    /// valid identity counts as a marker: when in doubt, the file is isolated.
    static let isolationAttributeName = "user.identityruntime.isolated"
    /// The extended attribute recording that a file was created while its owner was not managed: it holds that
    /// owner's name, and counts only while it names the file's owner. A file with neither marker naming its
    /// owner was recorded by an earlier build (``RecordedOwner/isLegacy``). Both markers naming the owner (a
    /// crash between two writes) count as isolated.
    static let openAttributeName = "user.identityruntime.open"

    let storage: OwnerStorage
    let index: OwnerIndex

    /// Records `record` on the open file `fd` (no owner: removes the owner and the isolation marker). Works on
    /// a temporary file before it is renamed into place: the attributes and the inode move with it.
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) for an owner no reader would read back
    ///   (`EnvelopeFormat.requireRecordable(_:)`), with nothing recorded.
    func setOwner(_ record: RecordedOwner, fd: Int32, path: String) throws(ProtectionError) {
        if let owner = record.owner { try EnvelopeFormat.requireRecordable(owner) }
        let info = try POSIX.fstatFD(fd, path: path)
        if storage == .automatic {
            if let owner = record.owner {
                let name = Array(owner.name.utf8)
                if record.isIsolated {
                    // The marker before the owner: in between, the marker names the new owner and the old
                    // owner's record does not count it, so no owner gains or loses a marker it did not have.
                    guard try POSIX.setXattr(fd: fd, path: path, FileOwnerStore.isolationAttributeName, name) else {
                        return try index.set(owner, isolated: true, for: info, path: path)
                    }
                    if try POSIX.setXattr(fd: fd, path: path, FileOwnerStore.attributeName, name) {
                        try POSIX.removeXattr(fd: fd, path: path, FileOwnerStore.openAttributeName)
                        return try index.set(nil, isolated: false, for: info, path: path)
                    }
                } else {
                    // The open marker, then the owner, then the isolation marker goes: in between, the
                    // markers name the new owner (both: isolated, the safe reading) or a previous one.
                    guard try POSIX.setXattr(fd: fd, path: path, FileOwnerStore.openAttributeName, name) else {
                        return try index.set(owner, isolated: false, for: info, path: path)
                    }
                    if try POSIX.setXattr(fd: fd, path: path, FileOwnerStore.attributeName, name) {
                        try POSIX.removeXattr(fd: fd, path: path, FileOwnerStore.isolationAttributeName)
                        return try index.set(nil, isolated: false, for: info, path: path)
                    }
                }
            } else {
                try POSIX.removeXattr(fd: fd, path: path, FileOwnerStore.attributeName)
                try POSIX.removeXattr(fd: fd, path: path, FileOwnerStore.isolationAttributeName)
                try POSIX.removeXattr(fd: fd, path: path, FileOwnerStore.openAttributeName)
            }
        }
        try index.set(record.owner, isolated: record.isIsolated, for: info, path: path)
    }

    /// Records `record` on the file at `path` (following symbolic links).
    func setOwner(_ record: RecordedOwner, path: String) throws(ProtectionError) {
        let fd = try POSIX.openFile(path, O_RDONLY)
        defer { POSIX.closeFile(fd) }
        try setOwner(record, fd: fd, path: path)
    }

    /// The recorded owner of the file at `path` whose `stat` is `info`, or `nil`.
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) when the recorded value is not a valid identity.
    func owner(path: String, info: stat) throws(ProtectionError) -> Identity? {
        try record(path: path, info: info).owner
    }

    /// The recorded owner of the file at `path` whose `stat` is `info`, and whether the file is recorded
    /// isolated; ``RecordedOwner/unowned`` when it has no owner. A record written before isolation was
    /// recorded has no marker: isolated only while its owner is managed (the caller upgrades it, see
    /// ``recordIsolation(of:path:info:)``).
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) when the recorded owner is not a valid identity.
    func record(path: String, info: stat) throws(ProtectionError) -> RecordedOwner {
        if storage == .automatic {
            switch try POSIX.getXattr(path, FileOwnerStore.attributeName) {
            case let .value(bytes):
                let owner = try withRawBytes(of: bytes) { (raw: UnsafeRawBufferPointer) throws(ProtectionError) -> Identity in
                    try EnvelopeFormat.decodeOwner(raw)
                }
                if try marker(FileOwnerStore.isolationAttributeName, path: path, names: owner) {
                    return RecordedOwner(owner, isolated: true)
                }
                let open = try marker(FileOwnerStore.openAttributeName, path: path, names: owner)
                return RecordedOwner(owner, isolated: false, legacy: !open)
            case .absent, .unsupported:
                break
            }
        }
        guard let entry = try index.entry(of: info) else { return .unowned }
        do {
            return RecordedOwner(try Identity(validating: entry.owner), isolated: entry.isolated == true, legacy: entry.isolated == nil)
        } catch {
            throw .invalidIdentity(reason: "owner index entry for \(path): \(error)")
        }
    }

    /// Records that the file at `path` (whose `stat` is `info`) owned by `owner` is isolated, where its owner
    /// is recorded; nothing when its owner is no longer `owner`. An open marker may stay beside it: both read as
    /// isolated.
    func recordIsolation(of owner: Identity, path: String, info: stat) throws(ProtectionError) {
        if storage == .automatic, case .value = try POSIX.getXattr(path, FileOwnerStore.attributeName) {
            // The marker names the owner: should the file be re-owned meanwhile, it counts for nothing.
            if try POSIX.setXattr(path: path, FileOwnerStore.isolationAttributeName, Array(owner.name.utf8)) { return }
        }
        try index.markIsolated(owner, for: info)
    }

    /// ``recordIsolation(of:path:info:)`` on the open file `fd`: the file a handle holds, whatever has taken
    /// its name since (a truncation or an encryption puts a new file at the path).
    func recordIsolation(of owner: Identity, fd: Int32, path: String) throws(ProtectionError) {
        if storage == .automatic, case .value = try POSIX.getXattr(fd: fd, path: path, FileOwnerStore.attributeName) {
            if try POSIX.setXattr(fd: fd, path: path, FileOwnerStore.isolationAttributeName, Array(owner.name.utf8)) { return }
        }
        try index.markIsolated(owner, for: try POSIX.fstatFD(fd, path: path))
    }

    /// Whether the marker `attribute` of the file at `path` names `owner`. An isolation marker that is not a
    /// valid identity counts (when in doubt, isolated); an open marker that is not one does not.
    private func marker(_ attribute: String, path: String, names owner: Identity) throws(ProtectionError) -> Bool {
        guard case let .value(bytes) = try POSIX.getXattr(path, attribute) else { return false }
        do throws(ProtectionError) {
            let marked = try withRawBytes(of: bytes) { (raw: UnsafeRawBufferPointer) throws(ProtectionError) -> Identity in
                try EnvelopeFormat.decodeOwner(raw)
            }
            return marked == owner
        } catch {
            return attribute == FileOwnerStore.isolationAttributeName
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
