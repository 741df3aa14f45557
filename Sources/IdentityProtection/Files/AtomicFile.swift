#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Crash-safe replacement of a file: write a temporary file next to it, `fsync` it, `rename` it over the
/// target, `fsync` the directory. A crash leaves the old file or the new one, never a torn one; a failure
/// removes the temporary file and leaves the target untouched.
///
/// The temporary file is named `.NAME.idp-RANDOM.tmp` and its writer holds an exclusive `flock` on it until
/// it is renamed or removed, so ``FileProtectionManager/removeInterruptedWrites(olderThan:)`` tells one that
/// a killed process left behind (no lock) from one being written (locked).
struct AtomicFile {
    /// Whether `name` is the name of a temporary file of an atomic write.
    static func isTemporaryName(_ name: String) -> Bool {
        name.hasPrefix(".") && name.hasSuffix(".tmp") && name.contains(".idp-")
    }

    let path: String
    let temporaryPath: String
    let fd: Int32
    private var finished = false

    /// Creates the temporary file with `mode` in the target's directory.
    init(replacing path: String, mode: mode_t) throws(ProtectionError) {
        self.path = path
        let directory = Paths.parent(path)
        var attempt = 0
        while true {
            let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let candidate = Paths.join(directory, ".\(Paths.lastComponent(path)).idp-\(suffix).tmp")
            do throws(ProtectionError) {
                fd = try POSIX.openFile(candidate, O_WRONLY | O_CREAT | O_EXCL, mode: mode)
                temporaryPath = candidate
                break
            } catch let error {
                attempt += 1
                if case let .ioFailure(_, _, code) = error, code == EEXIST, attempt < 16 { continue }
                if case .fileNotFound = error { throw .ioFailure(path: path, operation: "create temporary file", errno: ENOENT) }
                throw error
            }
        }
        // The umask may have narrowed the mode; make it exact.
        _ = fchmod(fd, mode)
        // Marks the file as being written; nobody else has it open yet (O_EXCL), so this cannot block.
        _ = flock(fd, LOCK_EX | LOCK_NB)
    }

    func write(_ bytes: [UInt8]) throws(ProtectionError) {
        try POSIX.writeAll(fd, bytes, path: temporaryPath)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) {
        try POSIX.writeAll(fd, bytes, path: temporaryPath)
    }

    /// Makes the new content durable and moves it over the target.
    /// The file stays open (and locked) until it is renamed, so a sweep never takes it for an abandoned one.
    mutating func commit() throws(ProtectionError) {
        do throws(ProtectionError) {
            try POSIX.fsyncFD(fd, path: temporaryPath)
            try POSIX.renamePath(temporaryPath, path)
            POSIX.closeFile(fd)
            finished = true
        } catch {
            _ = unlink(temporaryPath)
            POSIX.closeFile(fd)
            finished = true
            throw error
        }
        try POSIX.fsyncDirectory(Paths.parent(path))
    }

    /// Abandons the new content; the target is untouched.
    mutating func discard() {
        guard !finished else { return }
        _ = unlink(temporaryPath)
        POSIX.closeFile(fd)
        finished = true
    }

    /// Writes `bytes` to `path` atomically.
    static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws(ProtectionError) {
        var file = try AtomicFile(replacing: path, mode: mode)
        do throws(ProtectionError) {
            try file.write(bytes)
            try file.commit()
        } catch {
            file.discard()
            throw error
        }
    }
}
