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
        (fd, temporaryPath) = try Self.createTemporary(for: path, flags: O_WRONLY, mode: mode)
        // The umask may have narrowed the mode; make it exact. (Ignored: a failure leaves the file narrower
        // than asked, never wider.)
        _ = fchmod(fd, mode)
        // Marks the file as being written; nobody else has it open yet (O_EXCL), so this cannot block.
        // (Ignored: without the lock, a sweep still leaves the file alone for `minimumAge`.)
        _ = flock(fd, LOCK_EX | LOCK_NB)
    }

    func write(_ bytes: [UInt8]) throws(ProtectionError) {
        try POSIX.writeAll(fd, bytes, path: temporaryPath)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) {
        try POSIX.writeAll(fd, bytes, path: temporaryPath)
    }

    /// Makes the new content durable and gives it the target's name; then ``syncDirectory()`` makes the name
    /// durable. The file stays open (and locked) until it has the name, so a sweep never takes it for an
    /// abandoned one. A failure leaves the target untouched and the temporary file open, for the caller to forget
    /// its owner record (its descriptor is still this file's) and ``discard()`` it.
    ///
    /// - Parameter replacing: `true`: `rename(2)` over whatever is at the target. `false` (the caller saw
    ///   nothing there): `link(2)`, which refuses a name that exists, so a file that took the name since the
    ///   caller looked is never replaced unchecked.
    /// - Returns: `false` when `replacing` is `false` and something is at the target now (nothing was placed:
    ///   the caller decides again, or refuses).
    mutating func commit(replacing: Bool = true) throws(ProtectionError) -> Bool {
        try POSIX.fsyncFD(fd, path: temporaryPath)
        if replacing {
            try POSIX.renamePath(temporaryPath, path)
        } else if link(temporaryPath, path) == 0 {
            // The file has its name; the temporary one goes. Should this fail, the sweep removes that second
            // name and keeps the owner record (the file has more than one link).
            _ = unlink(temporaryPath)
        } else {
            let code = errno
            if code == EEXIST { return false }
            // A file system without hard links (FAT) refuses too, as `install` does: a rename there could replace
            // a file another writer put at the name since, unchecked.
            throw POSIX.failure(path, "link", code)
        }
        POSIX.closeFile(fd)
        finished = true
        return true
    }

    /// `fsync`s the target's directory after ``commit()``, so that the new name survives a crash. A failure
    /// means the new content is in place and may not survive a power loss.
    func syncDirectory() throws(ProtectionError) {
        try POSIX.fsyncDirectory(Paths.parent(path))
    }

    /// Abandons the new content; the target is untouched. Nothing after ``commit()`` (the content is in place).
    mutating func discard() {
        guard !finished else { return }
        // (Ignored: a temporary file that stays is never read, and `removeInterruptedWrites` deletes it.)
        _ = unlink(temporaryPath)
        POSIX.closeFile(fd)
        finished = true
    }

    /// Writes `bytes` to `path` atomically.
    static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws(ProtectionError) {
        var file = try AtomicFile(replacing: path, mode: mode)
        do throws(ProtectionError) {
            try file.write(bytes)
            _ = try file.commit()
        } catch {
            file.discard()
            throw error
        }
        try file.syncDirectory()
    }

    /// Creates a new temporary file beside `path` (a random name in its directory, `O_EXCL`), opened with
    /// `flags`, with `mode`; the sweep of interrupted writes recognizes the name.
    static func createTemporary(for path: String, flags: Int32, mode: mode_t) throws(ProtectionError) -> (fd: Int32, path: String) {
        let directory = Paths.parent(path)
        var attempt = 0
        while true {
            let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let candidate = Paths.join(directory, ".\(Paths.lastComponent(path)).idp-\(suffix).tmp")
            do throws(ProtectionError) {
                return (try POSIX.openFile(candidate, flags | O_CREAT | O_EXCL, mode: mode), candidate)
            } catch let error {
                attempt += 1
                if case let .ioFailure(_, _, code) = error, code == EEXIST, attempt < 16 { continue }
                if case .fileNotFound = error { throw .ioFailure(path: path, operation: "create temporary file", errno: ENOENT) }
                throw error
            }
        }
    }
}

extension AtomicFile {
    /// Puts a new file at `path` in one step, once it is complete: `prepare` gives it its owner record and
    /// first bytes under a temporary name (`.NAME.idp-RANDOM.tmp`, opened with `flags`), it is `fsync`ed, and
    /// then it takes `path`: `rename(2)` over what is there when `replacing`, else `link(2)`, which refuses a
    /// name that exists (the temporary name then goes). A failure, a refusal or a crash before that step
    /// leaves `path` as it was (a killed process leaves at most a temporary file, which
    /// ``FileProtectionManager/removeInterruptedWrites(olderThan:)`` deletes); nothing ever sees a file at
    /// `path` without its owner or its header.
    ///
    /// - Parameters:
    ///   - exactMode: `true`: the file gets exactly `mode` (a replacement keeps the replaced file's bits);
    ///     `false`: `mode` narrowed by the process umask (a new file).
    /// - Returns: the open descriptor of the file now at `path`, or `nil` when `replacing` is `false` and
    ///   something is at `path` already (nothing was changed).
    static func install(
        at path: String, flags: Int32, mode: mode_t, exactMode: Bool, replacing: Bool, owners: FileOwnerStore,
        prepare: (_ fd: Int32, _ temporaryPath: String) throws(ProtectionError) -> Void
    ) throws(ProtectionError) -> Int32? {
        let (fd, temporaryPath) = try createTemporary(for: path, flags: flags, mode: mode)
        var placed = false
        do throws(ProtectionError) {
            if exactMode, fchmod(fd, mode) != 0 { throw POSIX.failure(temporaryPath, "fchmod") }
            // Marks the file as being written until it has its name; nobody else has it open yet (O_EXCL), so
            // this cannot block, and a failure only leaves it to the age test of the sweep.
            _ = flock(fd, LOCK_EX | LOCK_NB)
            try prepare(fd, temporaryPath)
            try POSIX.fsyncFD(fd, path: temporaryPath)
            if replacing {
                try POSIX.renamePath(temporaryPath, path)
                placed = true
            } else {
                guard link(temporaryPath, path) == 0 else {
                    let code = errno
                    guard code == EEXIST else { throw POSIX.failure(path, "link", code) }
                    owners.forgetRemoved(fd: fd, path: temporaryPath)
                    _ = unlink(temporaryPath)
                    POSIX.closeFile(fd)
                    return nil
                }
                placed = true
                // The file has its name; the temporary one goes. Should this fail, the sweep removes that
                // second name and keeps the owner record (the file has more than one link).
                _ = unlink(temporaryPath)
            }
            // Dropping the lock cannot fail on a descriptor this call holds; if it did, the lock would only
            // last until the descriptor is closed, and a sweep never looks at a name without `.idp-`.
            _ = flock(fd, LOCK_UN)
            try POSIX.fsyncDirectory(Paths.parent(path))
            return fd
        } catch {
            if !placed {
                owners.forgetRemoved(fd: fd, path: temporaryPath)
                // (Ignored: a temporary file that stays is never read, and the sweep deletes it.)
                _ = unlink(temporaryPath)
            }
            POSIX.closeFile(fd)
            throw error
        }
    }
}
