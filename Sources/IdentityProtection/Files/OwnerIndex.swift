import Foundation
import IdentityRuntime

/// The owner index: file owners for file systems without user extended attributes.
///
/// A JSON file (`owners.index` in the state directory) mapping `"<st_dev>:<st_ino>"` to the owner and the
/// path last seen. Keyed by inode, an entry follows its file through renames within a file system. Every
/// change rewrites the file atomically (temporary file, `fsync`, `rename`, `fsync` of the directory), so a
/// crash leaves the index before or after the change.
final class OwnerIndex: Sendable {
    struct Entry: Codable, Sendable, Equatable {
        var owner: String
        var path: String
        /// Whether the file was created while its owner was managed (``RecordedOwner``). Absent only in
        /// entries written before isolation was recorded (``RecordedOwner/isLegacy``); older builds ignore it.
        var isolated: Bool?
    }

    private struct Document: Codable {
        var format: Int
        var entries: [String: Entry]
    }

    let path: String
    /// The entries as last read or written, with the version of the file they came from.
    private let cache = LockedValue<Snapshot?>(nil)

    /// The entries of one version of the file.
    private struct Snapshot {
        var entries: [String: Entry]
        /// The file's device, inode, size and change time (`nil`: there was no file). Every save puts a new
        /// file in place, so another manager's save (one sharing the state directory) changes it.
        var version: [UInt64]?
        /// A descriptor of that version, kept open while it is cached: its inode cannot be freed and reused
        /// by a later save, so a version equal to this one is this file, whatever the clock's resolution.
        var pinned: Int32?
    }

    init(path: String) {
        self.path = path
    }

    deinit {
        cache.withLock { cache in
            if let fd = cache?.pinned { POSIX.closeFile(fd) }
        }
    }

    static func key(_ info: stat) -> String {
        "\(info.st_dev):\(info.st_ino)"
    }

    func owner(of info: stat) throws(ProtectionError) -> String? {
        try entry(of: info)?.owner
    }

    func entry(of info: stat) throws(ProtectionError) -> Entry? {
        try cache.withLock { (cache: inout Snapshot?) throws(ProtectionError) -> Entry? in
            try refresh(&cache)
            return cache?.entries[OwnerIndex.key(info)]
        }
    }

    /// Records `owner`, and whether the file is `isolated` (`nil`: removes the entry).
    func set(_ owner: Identity?, isolated: Bool, for info: stat, path filePath: String) throws(ProtectionError) {
        try update { entries in
            let key = OwnerIndex.key(info)
            let entry = owner.map { Entry(owner: $0.name, path: filePath, isolated: isolated && !$0.isUnmanaged) }
            guard entries[key] != entry else { return false }
            entries[key] = entry
            return true
        }
    }

    /// Marks the entry of `info` isolated when it still names `owner`; nothing otherwise.
    func markIsolated(_ owner: Identity, for info: stat) throws(ProtectionError) {
        try update { entries in
            let key = OwnerIndex.key(info)
            // An entry whose owner does not validate is not marked: reading it fails (104) anyway.
            guard var entry = entries[key], entry.isolated != true,
                  (try? Identity(validating: entry.owner)) == owner else { return false }
            entry.isolated = true
            entries[key] = entry
            return true
        }
    }

    /// Removes entries; one write for all of them.
    func remove(_ infos: [stat]) throws(ProtectionError) {
        try update { entries in
            var changed = false
            for info in infos where entries.removeValue(forKey: OwnerIndex.key(info)) != nil { changed = true }
            return changed
        }
    }

    /// One change of the index: under the state file's lock (``StateFileLock``, taken first: a reader of this
    /// process waits for the cache only while the file is read or written, never for another process's lock),
    /// from the file as it is now (another manager may have saved since this one read it); `change` says whether
    /// it changed anything, and only then is the file written.
    private func update(_ change: (inout [String: Entry]) -> Bool) throws(ProtectionError) {
        try StateFileLock.withLock(of: path) { () throws(ProtectionError) in
            try cache.withLock { (cache: inout Snapshot?) throws(ProtectionError) in
                try refresh(&cache)
                var entries = cache?.entries ?? [:]
                guard change(&entries) else { return }
                try save(entries)
                // Under the lock nobody else saves: the file now is the one just written.
                Self.replace(&cache, with: try pin(entries))
            }
        }
    }

    /// Reads the file again when it is not the version `cache` came from.
    private func refresh(_ cache: inout Snapshot?) throws(ProtectionError) {
        let version = try POSIX.statPath(path).map(Self.version)
        if let cache, cache.version == version { return }
        Self.replace(&cache, with: try read())
    }

    private static func replace(_ cache: inout Snapshot?, with snapshot: Snapshot) {
        if let fd = cache?.pinned { POSIX.closeFile(fd) }
        cache = snapshot
    }

    private static func version(_ info: stat) -> [UInt64] {
        #if canImport(Darwin)
        let changed = info.st_ctimespec
        #else
        let changed = info.st_ctim
        #endif
        return [
            UInt64(truncatingIfNeeded: info.st_dev), UInt64(truncatingIfNeeded: info.st_ino),
            UInt64(truncatingIfNeeded: info.st_size), UInt64(truncatingIfNeeded: changed.tv_sec),
            UInt64(truncatingIfNeeded: changed.tv_nsec),
        ]
    }

    /// The file as it is now, pinned.
    private func read() throws(ProtectionError) -> Snapshot {
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY | O_CLOEXEC)
        } catch .fileNotFound {
            return Snapshot(entries: [:], version: nil, pinned: nil)
        }
        do throws(ProtectionError) {
            // The version of the file read, whatever replaced the name since it was opened.
            let version = Self.version(try POSIX.fstatFD(fd, path: path))
            let bytes = try POSIX.readToEnd(fd, path: path)
            guard let document = try? JSONDecoder().decode(Document.self, from: Data(bytes)), document.format == 1 else {
                throw ProtectionError.ioFailure(path: path, operation: "read owner index (malformed)", errno: EIO)
            }
            return Snapshot(entries: document.entries, version: version, pinned: fd)
        } catch {
            POSIX.closeFile(fd)
            throw error
        }
    }

    /// `entries`, just saved, with the file that holds them pinned.
    private func pin(_ entries: [String: Entry]) throws(ProtectionError) -> Snapshot {
        let fd = try POSIX.openFile(path, O_RDONLY | O_CLOEXEC)
        do throws(ProtectionError) {
            return Snapshot(entries: entries, version: Self.version(try POSIX.fstatFD(fd, path: path)), pinned: fd)
        } catch {
            POSIX.closeFile(fd)
            throw error
        }
    }

    private func save(_ entries: [String: Entry]) throws(ProtectionError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(Document(format: 1, entries: entries)) else {
            throw .ioFailure(path: path, operation: "encode owner index", errno: EIO)
        }
        try AtomicFile.write(Array(data), to: path, mode: 0o600)
    }
}
