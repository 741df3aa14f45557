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
    private let entries = LockedValue<[String: Entry]?>(nil)

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
        try entries.withLock { (entries: inout [String: Entry]?) throws(ProtectionError) -> Entry? in
            try loadIfNeeded(&entries)
            return entries?[OwnerIndex.key(info)]
        }
    }

    /// Records `owner`, and whether the file is `isolated` (`nil`: removes the entry).
    func set(_ owner: Identity?, isolated: Bool, for info: stat, path filePath: String) throws(ProtectionError) {
        try entries.withLock { (entries: inout [String: Entry]?) throws(ProtectionError) in
            try loadIfNeeded(&entries)
            var updated = entries ?? [:]
            let key = OwnerIndex.key(info)
            let entry = owner.map { Entry(owner: $0.name, path: filePath, isolated: isolated && !$0.isUnmanaged) }
            guard updated[key] != entry else { return }
            updated[key] = entry
            try save(updated)
            entries = updated
        }
    }

    /// Marks the entry of `info` isolated when it still names `owner`; nothing otherwise.
    func markIsolated(_ owner: Identity, for info: stat) throws(ProtectionError) {
        try entries.withLock { (entries: inout [String: Entry]?) throws(ProtectionError) in
            try loadIfNeeded(&entries)
            let key = OwnerIndex.key(info)
            // An entry whose owner does not validate is not marked: reading it fails (104) anyway.
            guard var entry = entries?[key], entry.isolated != true,
                  (try? Identity(validating: entry.owner)) == owner else { return }
            entry.isolated = true
            var updated = entries ?? [:]
            updated[key] = entry
            try save(updated)
            entries = updated
        }
    }

    /// Removes entries; one write for all of them.
    func remove(_ infos: [stat]) throws(ProtectionError) {
        try entries.withLock { (entries: inout [String: Entry]?) throws(ProtectionError) in
            try loadIfNeeded(&entries)
            var updated = entries ?? [:]
            var changed = false
            for info in infos where updated.removeValue(forKey: OwnerIndex.key(info)) != nil { changed = true }
            guard changed else { return }
            try save(updated)
            entries = updated
        }
    }

    private func loadIfNeeded(_ entries: inout [String: Entry]?) throws(ProtectionError) {
        guard entries == nil else { return }
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY)
        } catch .fileNotFound {
            entries = [:]
            return
        }
        defer { POSIX.closeFile(fd) }
        let bytes = try POSIX.readToEnd(fd, path: path)
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(bytes)), document.format == 1 else {
            throw .ioFailure(path: path, operation: "read owner index (malformed)", errno: EIO)
        }
        entries = document.entries
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
