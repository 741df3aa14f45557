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
        /// The file's device, inode, size and change time when read (`nil`: there was no file). Every save
        /// puts a new file in place, so another manager's save (one sharing the state directory) shows here.
        var version: [Int]?
    }

    init(path: String) {
        self.path = path
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

    /// One change of the index: under the state file's lock (``StateFileLock``), from the file as it is now
    /// (another manager may have saved since this one read it); `change` says whether it changed anything, and
    /// only then is the file written.
    private func update(_ change: (inout [String: Entry]) -> Bool) throws(ProtectionError) {
        try cache.withLock { (cache: inout Snapshot?) throws(ProtectionError) in
            try StateFileLock.withLock(of: path) { () throws(ProtectionError) in
                try refresh(&cache)
                var entries = cache?.entries ?? [:]
                guard change(&entries) else { return }
                try save(entries)
                cache = Snapshot(entries: entries, version: try currentVersion())
            }
        }
    }

    /// Reads the file again when it is not the version `cache` came from.
    private func refresh(_ cache: inout Snapshot?) throws(ProtectionError) {
        let version = try currentVersion()
        if let cache, cache.version == version { return }
        cache = try read()
    }

    /// The version of the file now: `nil` when there is none.
    private func currentVersion() throws(ProtectionError) -> [Int]? {
        try POSIX.statPath(path).map(Self.version)
    }

    private static func version(_ info: stat) -> [Int] {
        #if canImport(Darwin)
        let changed = info.st_ctimespec
        #else
        let changed = info.st_ctim
        #endif
        return [Int(info.st_dev), Int(info.st_ino), Int(info.st_size), Int(changed.tv_sec), Int(changed.tv_nsec)]
    }

    private func read() throws(ProtectionError) -> Snapshot {
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY)
        } catch .fileNotFound {
            return Snapshot(entries: [:], version: nil)
        }
        defer { POSIX.closeFile(fd) }
        // The version of the file read, whatever replaced the name since it was opened.
        let version = Self.version(try POSIX.fstatFD(fd, path: path))
        let bytes = try POSIX.readToEnd(fd, path: path)
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(bytes)), document.format == 1 else {
            throw .ioFailure(path: path, operation: "read owner index (malformed)", errno: EIO)
        }
        return Snapshot(entries: document.entries, version: version)
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
