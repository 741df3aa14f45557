import Foundation
import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A directory under a root whose path is longer than `PATH_MAX`: every call that names it by its path fails
/// with `ENAMETOOLONG`, for root as for anyone (permission bits do not stop root; a name too long does). The
/// program reaches it only through descriptors (`mkdirat`, `renameat`, `fstatat`), as a file system that
/// holds such a tree reaches it: the fault ``IsolationStress/FaultClass/unwalkableEntries``.
final class DeepDirectory: Sendable {
    /// The descriptors of the chain, the root's first and the deepest last.
    private let descriptors: [Int32]
    private let names: [String]
    /// The path that no call can use (for reports).
    let path: String
    private let moved = LockedValue<[String]>([])

    init(under root: String) throws {
        let name = String(repeating: "d", count: 200)
        var descriptors: [Int32] = []
        var names: [String] = []
        var parent = open(root, O_RDONLY | O_DIRECTORY)
        guard parent >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        descriptors.append(parent)
        var path = root
        while path.utf8.count <= Int(PATH_MAX) + 200 {
            guard mkdirat(parent, name, 0o700) == 0 || errno == EEXIST else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            let child = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            guard child >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            descriptors.append(child)
            names.append(name)
            parent = child
            path += "/" + name
        }
        self.descriptors = descriptors
        self.names = names
        self.path = path
    }

    private var deepest: Int32 { descriptors[descriptors.count - 1] }

    /// Moves the file at `source` (a path that works) into the directory as `name`; its owner record (an
    /// extended attribute, or the index by inode) goes with it. `false` when the rename failed.
    func moveIn(_ source: String, as name: String) -> Bool {
        guard renameat(AT_FDCWD, source, deepest, name) == 0 else { return false }
        moved.withLock { $0.append(name) }
        return true
    }

    /// Whether the file `name` moved in is still there.
    func contains(_ name: String) -> Bool {
        var info = stat()
        return fstatat(deepest, name, &info, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// Removes the tree, through its descriptors, and closes them. Results are not checked: what cannot be
    /// removed stays in the program's temporary directory, which decides nothing.
    func remove() {
        for name in moved.withLock({ $0 }) { unlinkat(deepest, name, 0) }
        for level in stride(from: names.count - 1, through: 0, by: -1) {
            unlinkat(descriptors[level], names[level], AT_REMOVEDIR)
        }
        for descriptor in descriptors { close(descriptor) }
    }
}
