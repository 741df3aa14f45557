import Foundation
import IdentityRuntime
import Synchronization

/// The default ``KeyStore``: one file per identity in a directory of its own.
///
/// - The directory is created with mode `0700` (an existing one others can read or enter is tightened to
///   `0700`, one of another user refused); each key file has mode `0600` and is named after the SHA-256
///   of the identity's case-folded name (`<64 hex digits>.key`), so names never leak into file names and
///   case variants of one identity share a file.
/// - A key file is JSON: `{"format":1,"identity":"…","current":"<key id hex>","keys":[{"id":"…","material":"<base64>"}]}`.
/// - Every change is written atomically (temporary file, `fsync`, `rename`, `fsync` of the directory).
/// - ``destroyKeys(for:)`` overwrites the file with zeros, `fsync`s and unlinks it. On journaling or
///   copy-on-write storage the overwrite is best effort; keep the directory on storage the OS encrypts.
///
/// Keys are cached in memory after first use. Use one instance per directory in a process; another process
/// that rotates keys in the same directory is seen when a key id is not in the cache.
public final class FileKeyStore: KeyStore {
    /// The directory holding the key files: its real path (symbolic links resolved when the store was made).
    public let directory: String

    private let cache = LockedValue(Cache())
    /// This instance, as the origin of the keys it hands out (never reused, unlike an object's address).
    private let instance = FileKeyStore.instances.add(1, ordering: .relaxed).newValue
    private static let instances = Atomic<UInt64>(0)

    /// What the store keeps in memory, by key file name.
    private struct Cache {
        /// Key rings as read from or written to their files.
        var rings: [String: KeyRing] = [:]
        /// Keys already decoded from their ring entries, by identity and key id, and the current key of each
        /// identity's ring: the hot path (every protect and unprotect asks for a key) is one dictionary lookup
        /// by identity; it neither derives the file name (SHA-256), nor scans the ring, nor decodes base64.
        /// An identity has exactly one key file (the name is derived from its folded name), so these are
        /// per-file caches too.
        var decoded: [Identity: [ProtectionKeyID: ProtectionKey]] = [:]
        var current: [Identity: ProtectionKey] = [:]
        /// Key file names of the identities seen.
        var fileNames: [Identity: String] = [:]

        mutating func setRing(_ ring: KeyRing?, for file: String, of identity: Identity) {
            rings[file] = ring
            decoded[identity] = nil
            current[identity] = nil
        }
    }

    struct KeyRing: Codable, Sendable {
        struct Entry: Codable, Sendable {
            var id: String
            var material: String
        }

        var format: Int
        var identity: String
        var current: String
        var keys: [Entry]
    }

    /// Opens (creating it when missing, mode `0700`) the key directory at `path`.
    ///
    /// The directory is private to this process's user: an existing one that others can read or enter is
    /// tightened to `0700`.
    /// - Throws: ``ProtectionError/insecureDirectory(path:reason:)`` (114) when it belongs to another user,
    ///   cannot be tightened, or lies below a directory another user could write to (one that belongs to
    ///   another user than root or this one, or that is group- or world-writable without the sticky bit);
    ///   ``ProtectionError/ioFailure(path:operation:errno:)`` (106) when it cannot be created.
    public init(atPath path: String) throws(ProtectionError) {
        let absolute = Paths.absolute(path)
        self.directory = try POSIX.makePrivateDirectory(absolute)
        // Reserved for every manager in the process, including those given a store that wraps this one.
        KeyDirectories.shared.register(directory)
    }

    /// ``directory``: no ``FileProtectionManager`` reads or writes a key file through its file APIs.
    public var keyDirectories: [String] { [directory] }

    /// The identity of every key file in ``directory``, read from the files (not from the cache, so that keys
    /// another instance or process made are listed too). A key file that does not parse, or that is not named
    /// after the identity it holds (``destroyKeys(for:)`` of that identity would not reach it), is listed as
    /// unreadable, with ``ProtectionError/ioFailure(path:operation:errno:)`` (106); one of zeros only is what a
    /// ``destroyKeys(for:)`` cut short leaves (it overwrites before it unlinks), and holds no key: it is passed
    /// over.
    /// - Throws: ``ProtectionError/ioFailure(path:operation:errno:)`` (106) when the directory cannot be listed.
    public func identitiesWithKeys() throws(ProtectionError) -> KeyListing? {
        var listing = KeyListing(identities: [])
        for name in try POSIX.directoryEntries(directory) where Self.isKeyFileName(name) {
            let path = Paths.join(directory, name)
            do throws(ProtectionError) {
                // Gone since the directory was read (destroyed): no keys.
                guard let bytes = try readKeyFile(name) else { continue }
                if !bytes.isEmpty, bytes.allSatisfy({ $0 == 0 }) { continue }
                let ring = try decodeRing(bytes, path: path)
                let identity = Identity(ring.identity)
                guard !identity.isUnmanaged, try fileName(for: identity) == name else { throw corrupt(path) }
                listing.identities.insert(identity)
            } catch {
                listing.unreadable.append(WipeLeftover(path: path, owner: nil, error: error))
            }
        }
        return listing
    }

    /// Whether `name` is a key file's: 64 lowercase hex digits and `.key` (a temporary file of an atomic
    /// write is not).
    private static func isKeyFileName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard utf8.count == 68, name.hasSuffix(".key") else { return false }
        return utf8.prefix(64).allSatisfy(Hex.isLowercaseDigit)
    }

    public func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try requireNamed(identity)
        return try cache.withLock { (cache: inout Cache) throws(ProtectionError) -> ProtectionKey in
            if let key = cache.current[identity] { return key }
            let file = try fileName(for: identity, in: &cache)
            if cache.rings[file] == nil, let ring = try load(file) { cache.setRing(ring, for: file, of: identity) }
            if let ring = cache.rings[file] {
                let key = try key(in: ring, hexID: ring.current, identity: identity, cache: &cache)
                cache.current[identity] = key
                return key
            }
            let key = try ProtectionKey.generate().handedOut(by: instance)
            let ring = KeyRing(format: 1, identity: identity.name, current: key.id.description, keys: [entry(for: key)])
            try save(ring, file)
            cache.setRing(ring, for: file, of: identity)
            return key
        }
    }

    public func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if identity.isUnmanaged { throw .keyNotFound(identity: identity, keyID: id) }
        return try cache.withLock { (cache: inout Cache) throws(ProtectionError) -> ProtectionKey in
            if let key = cache.decoded[identity]?[id] { return key }
            let file = try fileName(for: identity, in: &cache)
            let hex = id.description
            if let ring = cache.rings[file], ring.keys.contains(where: { $0.id == hex }) {
                return try key(in: ring, hexID: hex, identity: identity, cache: &cache)
            }
            guard let ring = try load(file) else {
                cache.setRing(nil, for: file, of: identity)
                throw .keyNotFound(identity: identity, keyID: id)
            }
            cache.setRing(ring, for: file, of: identity)
            return try key(in: ring, hexID: hex, identity: identity, cache: &cache)
        }
    }

    @discardableResult
    public func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try requireNamed(identity)
        return try cache.withLock { (cache: inout Cache) throws(ProtectionError) -> ProtectionKey in
            let file = try fileName(for: identity, in: &cache)
            let key = try ProtectionKey.generate().handedOut(by: instance)
            var existing = cache.rings[file]
            if existing == nil { existing = try load(file) }
            var ring = existing ?? KeyRing(format: 1, identity: identity.name, current: key.id.description, keys: [])
            ring.keys.append(entry(for: key))
            ring.current = key.id.description
            try save(ring, file)
            cache.setRing(ring, for: file, of: identity)
            return key
        }
    }

    public func destroyKeys(for identity: Identity) throws(ProtectionError) {
        if identity.isUnmanaged { return }
        // Handles opened with these keys stop before the keys go (see `ProtectedFile`), and an open that began
        // meanwhile, with the key still cached, is refused by the second revocation once they are gone.
        KeyRevocations.shared.revoke(identity, in: self)
        defer { KeyRevocations.shared.revoke(identity, in: self) }
        try cache.withLock { (cache: inout Cache) throws(ProtectionError) in
            let file = try fileName(for: identity, in: &cache)
            // The keys by their ids, in every scope: handles opened through a store that wraps this one hold
            // them too. A ring that cannot be read names no ids: the identity is revoked everywhere instead.
            var ids: Set<ProtectionKeyID>?
            do throws(ProtectionError) {
                var ring = cache.rings[file]
                if ring == nil { ring = try load(file) }
                ids = Set((ring?.keys ?? []).compactMap { ProtectionKeyID(hex: $0.id) })
            } catch {
                ids = nil
            }
            KeyRevocations.shared.revoke(ids, of: identity, handedOutBy: instance)
            cache.setRing(nil, for: file, of: identity)
            let path = Paths.join(directory, file)
            guard let info = try POSIX.lstatPath(path) else { return }
            // Best-effort overwrite before unlinking: dropping its errors is safe because the unlink below
            // decides the outcome (its failure is thrown), and on journaling or copy-on-write file systems an
            // overwrite is no guarantee anyway; the wrapped key is what the unlink destroys.
            if POSIX.isRegular(info), let fd = try? POSIX.openFile(path, O_WRONLY) {
                defer { POSIX.closeFile(fd) }
                try? POSIX.writeAll(fd, [UInt8](repeating: 0, count: Int(info.st_size)), path: path)
                try? POSIX.fsyncFD(fd, path: path)
            }
            do throws(ProtectionError) {
                try POSIX.unlinkPath(path)
            } catch .fileNotFound {
                return
            }
            try POSIX.fsyncDirectory(directory)
        }
    }

    // MARK: Storage

    private func requireNamed(_ identity: Identity) throws(ProtectionError) {
        guard !identity.isUnmanaged else {
            throw .invalidIdentity(reason: "the unmanaged identity has no keys")
        }
    }

    private func fileName(for identity: Identity) throws(ProtectionError) -> String {
        Hex.encode(try ProtectionCrypto.sha256(Array(identity.foldedName.utf8))) + ".key"
    }

    /// ``fileName(for:)``, remembered.
    private func fileName(for identity: Identity, in cache: inout Cache) throws(ProtectionError) -> String {
        if let file = cache.fileNames[identity] { return file }
        let file = try fileName(for: identity)
        cache.fileNames[identity] = file
        return file
    }

    private func entry(for key: ProtectionKey) -> KeyRing.Entry {
        KeyRing.Entry(id: key.id.description, material: Data(key.material).base64EncodedString())
    }

    /// The key `hexID` of `ring` (the ring of `identity`), decoded and remembered in `cache`.
    private func key(
        in ring: KeyRing, hexID: String, identity: Identity, cache: inout Cache
    ) throws(ProtectionError) -> ProtectionKey {
        let key = try decodeKey(in: ring, hexID: hexID, identity: identity)
        cache.decoded[identity, default: [:]][key.id] = key
        return key
    }

    private func decodeKey(in ring: KeyRing, hexID: String, identity: Identity) throws(ProtectionError) -> ProtectionKey {
        guard let entry = ring.keys.first(where: { $0.id == hexID }), let id = ProtectionKeyID(hex: hexID) else {
            throw .keyNotFound(identity: identity, keyID: ProtectionKeyID(hex: hexID))
        }
        guard let material = Data(base64Encoded: entry.material) else {
            throw corrupt(Paths.join(directory, keyFileNameForError(identity)))
        }
        return try ProtectionKey(id: id, material: Array(material)).handedOut(by: instance)
    }

    private func keyFileNameForError(_ identity: Identity) -> String {
        // For an error message only: no decision depends on it.
        (try? fileName(for: identity)) ?? "?"
    }

    private func corrupt(_ path: String) -> ProtectionError {
        .ioFailure(path: path, operation: "read key file (malformed)", errno: EIO)
    }

    private func load(_ file: String) throws(ProtectionError) -> KeyRing? {
        guard let bytes = try readKeyFile(file) else { return nil }
        return try decodeRing(bytes, path: Paths.join(directory, file))
    }

    /// The bytes of the key file `file`, or `nil` when there is none.
    private func readKeyFile(_ file: String) throws(ProtectionError) -> [UInt8]? {
        let path = Paths.join(directory, file)
        let fd: Int32
        do throws(ProtectionError) {
            fd = try POSIX.openFile(path, O_RDONLY)
        } catch .fileNotFound {
            return nil
        }
        defer { POSIX.closeFile(fd) }
        return try POSIX.readToEnd(fd, path: path)
    }

    private func decodeRing(_ bytes: [UInt8], path: String) throws(ProtectionError) -> KeyRing {
        // The decoder's error becomes the typed corruption error: a key ring that does not decode refuses.
        guard let ring = try? JSONDecoder().decode(KeyRing.self, from: Data(bytes)), ring.format == 1 else {
            throw corrupt(path)
        }
        return ring
    }

    private func save(_ ring: KeyRing, _ file: String) throws(ProtectionError) {
        let bytes: Data
        do {
            bytes = try JSONEncoder().encode(ring)
        } catch {
            throw .ioFailure(path: Paths.join(directory, file), operation: "encode key file", errno: EIO)
        }
        try AtomicFile.write(Array(bytes), to: Paths.join(directory, file), mode: 0o600)
    }
}
