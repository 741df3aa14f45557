#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive `flock(2)` on `FILE.lock` beside a file of the state directory, held for one read-modify-write
/// of that file. Managers sharing a state directory, in this process (each opens the lock file itself: `flock`
/// locks belong to an open file description) or in others, then change the file one at a time, each starting
/// from what the last one wrote: no change of one is lost to the other's save. The lock ends when the
/// descriptor closes, so a process killed while holding it holds nothing.
enum StateFileLock {
    /// Runs `body` holding the lock of the state file at `path`.
    static func withLock<T>(of path: String, _ body: () throws(ProtectionError) -> T) throws(ProtectionError) -> T {
        let lockPath = path + ".lock"
        let fd = try POSIX.openFile(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600)
        defer { POSIX.closeFile(fd) }
        while flock(fd, LOCK_EX) != 0 {
            let code = errno
            guard code == EINTR else { throw POSIX.failure(lockPath, "flock", code) }
        }
        return try body()
    }
}
