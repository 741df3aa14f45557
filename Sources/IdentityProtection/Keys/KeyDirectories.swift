import IdentityRuntime

/// Every directory a ``FileKeyStore`` of this process keeps key files in, so that no ``FileProtectionManager``
/// reads or writes them through its file APIs, whatever store it was given: a store of the app's own that
/// wraps the `FileKeyStore` need not say where the inner store keeps its files.
///
/// A directory stays reserved after its store is gone: its key files outlive the object, and a path that was
/// a key directory once is never worth handing out as data (deny by default).
package final class KeyDirectories: Sendable {
    /// The process's registry.
    package static let shared = KeyDirectories()

    private let directories = LockedValue(Set<String>())

    /// Reserves `directory` (a real path) from now on.
    package func register(_ directory: String) {
        directories.withLock { _ = $0.insert(directory) }
    }

    /// Whether `path` (absolute, normalized, links resolved) is a registered directory or lies inside one:
    /// one lookup per component of the path, however many stores the process has made.
    package func contains(_ path: String) -> Bool {
        directories.withLock { directories in
            guard !directories.isEmpty else { return false }
            var candidate = path
            while true {
                if directories.contains(candidate) { return true }
                if candidate == "/" { return false }
                candidate = Paths.parent(candidate)
            }
        }
    }
}
