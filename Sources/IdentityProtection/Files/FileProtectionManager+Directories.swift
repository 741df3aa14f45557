import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension FileProtectionManager {
    /// Gives the directory at `path` an owner: files created inside it (at any depth, up to the protected root
    /// that contains it) by a thread or task that has no thread identity of its own get this owner.
    ///
    /// Precedence for the owner of a new file, first match wins:
    /// 1. an owner passed explicitly (``openProtectedFile(atPath:options:owner:permissions:)``);
    /// 2. the creating thread's or task's own identity (`IdentityContext.currentThreadIdentity`, including
    ///    `Identity.unmanaged` when it was set to `""`);
    /// 3. the owner of the nearest enclosing directory that has one, searching from the file's directory up to
    ///    the protected root containing it (only the file's own directory when it is under no root);
    /// 4. the process identity (`IdentityContext.processIdentity`);
    /// 5. none.
    ///
    /// So a directory owner outranks the process-wide default but never a thread that works for an account:
    /// `effectiveFileIdentity` with the directory owner slotted in between its two levels.
    ///
    /// Existing files inside are not changed; a directory owner does not encrypt anything by itself.
    /// - Parameters:
    ///   - path: the directory.
    ///   - owner: the owner; `nil` means the caller's `IdentityContext.effectiveFileIdentity`, and if
    ///     that is `nil` too, the directory's owner is removed.
    ///
    /// Access: a directory that already has an owner is that owner's: changing or removing its owner modifies
    /// it (the caller must be allowed to modify the owner's data) and, for another owner, transfers it (the
    /// owner's data must be allowed to go there), as for a file.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no directory at `path`; the policy's refusal when `owner` may not get new data, or when
    ///   the caller may not re-own the directory's current owner's directory; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func protectDirectory(atPath path: String, owner: Identity? = nil) throws(ProtectionError) {
        let owner = owner ?? IdentityContext.effectiveFileIdentity
        try policy.authorizeCreation(for: owner)
        let path = try target(path)
        // Counted as a creation for `owner`: a wipe that starts meanwhile waits for it, and clears the owner it sets.
        try creating(for: owner) { () throws(ProtectionError) in
            guard let info = try POSIX.statPath(path), POSIX.isDirectory(info) else { throw .fileNotFound(path: path) }
            try authorizeHandOver(of: try owners.record(path: path, info: info), to: owner)
            let fd = try POSIX.openFile(path, O_RDONLY | O_DIRECTORY)
            defer { POSIX.closeFile(fd) }
            // A directory holds no data of its own: its owner only names the owner of files created in it, which
            // record their own isolation.
            try owners.setOwner(RecordedOwner(owner, isolated: false), fd: fd, path: path)
        }
    }

    /// The owner given to the directory at `path` with ``protectDirectory(atPath:owner:)``, or `nil`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) no directory at `path`; ``ProtectionError/invalidIdentity(reason:)`` (104) an unreadable recorded owner; ``ProtectionError/ioFailure(path:operation:errno:)`` (106) the OS refused.
    public func ownerOfDirectory(atPath path: String) throws(ProtectionError) -> Identity? {
        let path = try target(path)
        guard let info = try POSIX.statPath(path), POSIX.isDirectory(info) else { throw .fileNotFound(path: path) }
        return try owners.owner(path: path, info: info)
    }

    /// The owner a file created at `path` now gets (see ``protectDirectory(atPath:owner:)`` for the precedence).
    func ownerForNewFile(at path: String, explicit: Identity?) throws(ProtectionError) -> Identity? {
        if let explicit { return explicit }
        if let identity = IdentityContext.currentThreadIdentity { return identity }
        if let inherited = try inheritedOwner(forFileAt: path) { return inherited }
        return IdentityContext.effectiveFileIdentity
    }

    /// The owner of the nearest enclosing directory that has one (see ``protectDirectory(atPath:owner:)``).
    func inheritedOwner(forFileAt path: String) throws(ProtectionError) -> Identity? {
        // `path` is resolved (``target(_:)``): compare it with the roots' real paths.
        let root = roots.map { POSIX.realPath($0) ?? $0 }.filter { Paths.isWithin(path, root: $0) }.max { $0.count < $1.count }
        var directory = Paths.parent(path)
        while true {
            if let info = try POSIX.statPath(directory), POSIX.isDirectory(info),
               let owner = try owners.owner(path: directory, info: info) {
                return owner
            }
            guard let root, directory != root, Paths.isWithin(directory, root: root) else { return nil }
            let parent = Paths.parent(directory)
            if parent == directory { return nil }
            directory = parent
        }
    }
}
