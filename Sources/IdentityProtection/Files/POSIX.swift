#if canImport(Glibc)
import Glibc
import CIdentityCrypto
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Thin, checked wrappers over the POSIX calls the module makes. Every failure is a ``ProtectionError``:
/// `ENOENT` / not a regular file is ``ProtectionError/fileNotFound(path:)`` (105), anything else the OS refuses is
/// ``ProtectionError/ioFailure(path:operation:errno:)`` (106).
enum POSIX {
    static var lastErrno: Int32 { errno }

    static func failure(_ path: String, _ operation: String, _ code: Int32 = errno) -> ProtectionError {
        .ioFailure(path: path, operation: operation, errno: code)
    }

    /// ``openFile(_:_:mode:)`` for reading.
    static func openForReading(_ path: String) throws(ProtectionError) -> Int32 {
        try openFile(path, O_RDONLY)
    }

    /// `open(2)`, retrying on `EINTR`, close-on-exec.
    static func openFile(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(ProtectionError) -> Int32 {
        while true {
            let fd = open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            let code = errno
            if code == EINTR { continue }
            if code == ENOENT { throw .fileNotFound(path: path) }
            if code == EISDIR { throw .fileNotFound(path: path) }
            throw failure(path, "open", code)
        }
    }

    static func closeFile(_ fd: Int32) {
        _ = close(fd)
    }

    /// `lstat(2)`; `nil` when nothing is at `path`.
    static func lstatPath(_ path: String) throws(ProtectionError) -> stat? {
        var info = stat()
        if lstat(path, &info) == 0 { return info }
        let code = errno
        if code == ENOENT { return nil }
        throw failure(path, "lstat", code)
    }

    /// `stat(2)` following symbolic links; `nil` when nothing is at `path`.
    static func statPath(_ path: String) throws(ProtectionError) -> stat? {
        var info = stat()
        if stat(path, &info) == 0 { return info }
        let code = errno
        if code == ENOENT { return nil }
        if code == ENOTDIR { throw .fileNotFound(path: path) }
        throw failure(path, "stat", code)
    }

    static func fstatFD(_ fd: Int32, path: String) throws(ProtectionError) -> stat {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(path, "fstat") }
        return info
    }

    static func isRegular(_ info: stat) -> Bool {
        (info.st_mode & S_IFMT) == S_IFREG
    }

    static func isDirectory(_ info: stat) -> Bool {
        (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Writes every byte, retrying on `EINTR` and short writes.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(ProtectionError) {
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw failure(path, "write")
            }
            offset += written
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(ProtectionError) {
        var failure: ProtectionError?
        bytes.withUnsafeBytes { buffer in
            do throws(ProtectionError) { try writeAll(fd, buffer, path: path) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Reads up to `count` bytes, fewer only at end of file.
    static func readUpTo(_ fd: Int32, upTo count: Int, path: String) throws(ProtectionError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        var code: Int32 = 0
        buffer.withUnsafeMutableBytes { raw in
            while filled < count {
                let got = read(fd, raw.baseAddress! + filled, count - filled)
                if got < 0 {
                    if errno == EINTR { continue }
                    code = errno
                    return
                }
                if got == 0 { return }
                filled += got
            }
        }
        if code != 0 { throw failure(path, "read", code) }
        buffer.removeSubrange(filled...)
        return buffer
    }

    /// Reads the whole file at `fd` from its current offset.
    static func readToEnd(_ fd: Int32, path: String) throws(ProtectionError) -> [UInt8] {
        var result: [UInt8] = []
        while true {
            let chunk = try readUpTo(fd, upTo: 1 << 16, path: path)
            result.append(contentsOf: chunk)
            if chunk.count < 1 << 16 { return result }
        }
    }

    /// `pread(2)` of up to `count` bytes at `offset`, fewer only at end of file.
    static func preadUpTo(_ fd: Int32, upTo count: Int, at offset: Int64, path: String) throws(ProtectionError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let result: Result<Int, ProtectionError> = buffer.withUnsafeMutableBytes { raw in
            do throws(ProtectionError) { return .success(try preadInto(fd, raw, at: offset, path: path)) } catch { return .failure(error) }
        }
        let filled = try result.get()
        if filled < count { buffer.removeSubrange(filled...) }
        return buffer
    }

    /// `pread(2)` filling `buffer` from `offset`; returns the bytes read (fewer only at end of file).
    static func preadInto(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String) throws(ProtectionError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let got = pread(fd, buffer.baseAddress! + filled, buffer.count - filled, off_t(offset) + off_t(filled))
            if got < 0 {
                if errno == EINTR { continue }
                throw failure(path, "pread")
            }
            if got == 0 { break }
            filled += got
        }
        return filled
    }

    /// `pwrite(2)` of every byte at `offset`, retrying on `EINTR` and short writes.
    static func pwriteAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String) throws(ProtectionError) {
        var done = 0
        while done < bytes.count {
            let written = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if written < 0 {
                if errno == EINTR { continue }
                throw failure(path, "pwrite")
            }
            done += written
        }
    }

    static func pwriteAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int64, path: String) throws(ProtectionError) {
        try withRawBytes(of: bytes) { (raw) throws(ProtectionError) in try pwriteAll(fd, raw, at: offset, path: path) }
    }

    static func truncateFD(_ fd: Int32, to length: Int64, path: String) throws(ProtectionError) {
        while ftruncate(fd, off_t(length)) != 0 {
            if errno == EINTR { continue }
            throw failure(path, "ftruncate")
        }
    }

    static func fsyncFD(_ fd: Int32, path: String) throws(ProtectionError) {
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw failure(path, "fsync")
        }
    }

    /// Makes a rename or unlink in `directory` durable.
    static func fsyncDirectory(_ directory: String) throws(ProtectionError) {
        let fd = try openFile(directory, O_RDONLY | O_DIRECTORY)
        defer { closeFile(fd) }
        try fsyncFD(fd, path: directory)
    }

    static func renamePath(_ from: String, _ to: String) throws(ProtectionError) {
        guard rename(from, to) == 0 else { throw failure(to, "rename") }
    }

    static func unlinkPath(_ path: String) throws(ProtectionError) {
        guard unlink(path) == 0 else {
            let code = errno
            if code == ENOENT { throw .fileNotFound(path: path) }
            throw failure(path, "unlink", code)
        }
    }

    /// Creates `path` and its missing parents with `mode`.
    static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(ProtectionError) {
        if let info = try statPath(path) {
            guard isDirectory(info) else { throw failure(path, "mkdir", ENOTDIR) }
            return
        }
        let parent = Paths.parent(path)
        if parent != path { try makeDirectories(parent, mode: mode) }
        if mkdir(path, mode) != 0 && errno != EEXIST { throw failure(path, "mkdir") }
    }

    /// Creates `path` (and its missing parents) as a directory only this process's user may read, write or enter.
    ///
    /// An existing directory that others can read, write or enter (any of the mode bits `0077`), one the app
    /// made with its umask's `0755` say, is tightened to `0700`; one that belongs to another user, or whose
    /// mode cannot be changed, or one below a directory that another user could write (see
    /// `checkAncestors(of:)`), is refused with ``ProtectionError/insecureDirectory(path:reason:)``.
    ///
    /// - Returns: the directory's real path (symbolic links resolved), the one the caller must use from then
    ///   on: a link on the way to it could be swapped later, the checked directories cannot.
    static func makePrivateDirectory(_ path: String) throws(ProtectionError) -> String {
        try makeDirectories(path, mode: 0o700)
        guard let resolved = realPath(path) else { throw failure(path, "realpath") }
        guard let info = try statPath(resolved) else { throw failure(resolved, "stat", ENOENT) }
        guard info.st_uid == geteuid() else {
            throw .insecureDirectory(path: path, reason: "it belongs to user \(info.st_uid), not to this process's user \(geteuid())")
        }
        try checkAncestors(of: resolved, requested: path)
        let permissions = info.st_mode & 0o7777
        guard permissions & 0o077 != 0 else { return resolved }
        guard chmod(path, 0o700) == 0 else {
            let code = errno
            throw .insecureDirectory(
                path: path, reason: "mode \(String(permissions, radix: 8)) lets others in, and chmod 700 failed: \(ProtectionError.errnoName(code))")
        }
        return resolved
    }

    /// The real path of `path` (every symbolic link resolved), or `nil` when it does not resolve.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Refuses (``ProtectionError/insecureDirectory(path:reason:)`` (114)) a private directory that another user could move away or replace: every directory above
    /// it (after symbolic links are resolved) must belong to root or to this process's user, and must not be
    /// writable by group or others unless its sticky bit is set (as on `/tmp`, where others cannot rename
    /// what they do not own). The same rule as OpenSSH's for the files it trusts.
    private static func checkAncestors(of resolved: String, requested path: String) throws(ProtectionError) {
        var directory = resolved
        let user = geteuid()
        while directory != "/" {
            directory = Paths.parent(directory)
            guard let info = try statPath(directory) else { throw failure(directory, "stat", ENOENT) }
            if info.st_uid != 0 && info.st_uid != user {
                throw .insecureDirectory(
                    path: path, reason: "\(directory) above it belongs to user \(info.st_uid), who could replace it")
            }
            let sticky = info.st_mode & mode_t(S_ISVTX) != 0
            if info.st_mode & 0o022 != 0 && !sticky {
                throw .insecureDirectory(
                    path: path,
                    reason: "\(directory) above it has mode \(String(info.st_mode & 0o7777, radix: 8)): others could replace it")
            }
        }
    }

    /// The entries of a directory, without `.` and `..`.
    static func directoryEntries(_ path: String) throws(ProtectionError) -> [String] {
        guard let dir = opendir(path) else { throw failure(path, "opendir") }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    // MARK: Extended attributes

    /// Result of reading an extended attribute.
    enum XattrValue {
        case value([UInt8])
        case absent
        case unsupported
    }

    static func isUnsupported(_ code: Int32) -> Bool {
        code == ENOTSUP || code == EOPNOTSUPP
    }

    static func getXattr(_ path: String, _ name: String) throws(ProtectionError) -> XattrValue {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let got = buffer.withUnsafeMutableBytes { raw in
            platformGetxattr(path, name, raw.baseAddress, raw.count)
        }
        return try xattrValue(got, buffer, path: path, operation: "getxattr")
    }

    /// ``getXattr(_:_:)`` of the open file `fd` (whatever name `path` has now).
    static func getXattr(fd: Int32, path: String, _ name: String) throws(ProtectionError) -> XattrValue {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let got = buffer.withUnsafeMutableBytes { raw in
            platformFgetxattr(fd, name, raw.baseAddress, raw.count)
        }
        return try xattrValue(got, buffer, path: path, operation: "fgetxattr")
    }

    private static func xattrValue(_ got: Int, _ buffer: [UInt8], path: String, operation: String) throws(ProtectionError) -> XattrValue {
        if got >= 0 { return .value(Array(buffer[..<got])) }
        let code = errno
        if code == ENODATA_OR_NOATTR { return .absent }
        if isUnsupported(code) { return .unsupported }
        if code == ENOENT { throw .fileNotFound(path: path) }
        throw failure(path, operation, code)
    }

    /// `true` when set; `false` when the file system does not support user extended attributes.
    static func setXattr(fd: Int32, path: String, _ name: String, _ value: [UInt8]) throws(ProtectionError) -> Bool {
        let status = value.withUnsafeBytes { raw in
            platformFsetxattr(fd, name, raw.baseAddress, raw.count)
        }
        if status == 0 { return true }
        let code = errno
        if isUnsupported(code) { return false }
        throw failure(path, "fsetxattr", code)
    }

    static func setXattr(path: String, _ name: String, _ value: [UInt8]) throws(ProtectionError) -> Bool {
        let status = value.withUnsafeBytes { raw in
            platformSetxattr(path, name, raw.baseAddress, raw.count)
        }
        if status == 0 { return true }
        let code = errno
        if isUnsupported(code) { return false }
        if code == ENOENT { throw .fileNotFound(path: path) }
        throw failure(path, "setxattr", code)
    }

    static func removeXattr(fd: Int32, path: String, _ name: String) throws(ProtectionError) {
        if platformFremovexattr(fd, name) == 0 { return }
        let code = errno
        if code == ENODATA_OR_NOATTR || isUnsupported(code) { return }
        throw failure(path, "fremovexattr", code)
    }

    static func removeXattr(path: String, _ name: String) throws(ProtectionError) {
        if platformRemovexattr(path, name) == 0 { return }
        let code = errno
        if code == ENODATA_OR_NOATTR || isUnsupported(code) { return }
        if code == ENOENT { throw .fileNotFound(path: path) }
        throw failure(path, "removexattr", code)
    }

    // MARK: Platform spellings

    #if canImport(Darwin)
    static let ENODATA_OR_NOATTR = ENOATTR
    static func platformGetxattr(_ path: String, _ name: String, _ value: UnsafeMutableRawPointer?, _ size: Int) -> Int {
        getxattr(path, name, value, size, 0, 0)
    }
    static func platformFgetxattr(_ fd: Int32, _ name: String, _ value: UnsafeMutableRawPointer?, _ size: Int) -> Int {
        fgetxattr(fd, name, value, size, 0, 0)
    }
    static func platformSetxattr(_ path: String, _ name: String, _ value: UnsafeRawPointer?, _ size: Int) -> Int32 {
        setxattr(path, name, value, size, 0, 0)
    }
    static func platformFsetxattr(_ fd: Int32, _ name: String, _ value: UnsafeRawPointer?, _ size: Int) -> Int32 {
        fsetxattr(fd, name, value, size, 0, 0)
    }
    static func platformRemovexattr(_ path: String, _ name: String) -> Int32 { removexattr(path, name, 0) }
    static func platformFremovexattr(_ fd: Int32, _ name: String) -> Int32 { fremovexattr(fd, name, 0) }
    #else
    static let ENODATA_OR_NOATTR = ENODATA
    static func platformGetxattr(_ path: String, _ name: String, _ value: UnsafeMutableRawPointer?, _ size: Int) -> Int {
        getxattr(path, name, value, size)
    }
    static func platformFgetxattr(_ fd: Int32, _ name: String, _ value: UnsafeMutableRawPointer?, _ size: Int) -> Int {
        fgetxattr(fd, name, value, size)
    }
    static func platformSetxattr(_ path: String, _ name: String, _ value: UnsafeRawPointer?, _ size: Int) -> Int32 {
        setxattr(path, name, value, size, 0)
    }
    static func platformFsetxattr(_ fd: Int32, _ name: String, _ value: UnsafeRawPointer?, _ size: Int) -> Int32 {
        fsetxattr(fd, name, value, size, 0)
    }
    static func platformRemovexattr(_ path: String, _ name: String) -> Int32 { removexattr(path, name) }
    static func platformFremovexattr(_ fd: Int32, _ name: String) -> Int32 { fremovexattr(fd, name) }
    #endif
}

