import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension FileProtectionManager {
    /// The selective wipe: deletes every regular file under the protected roots owned by `identity`, then
    /// destroys the identity's keys, so protected data and copies of encrypted files elsewhere become
    /// unreadable too.
    ///
    /// Files owned by anyone else, unowned files, directories and symbolic links are not deleted; symbolic
    /// links are not followed. Directories owned by `identity` (``protect(directory:identity:)``) lose their
    /// owner, so nothing created in them later is owned by the wiped account. An owner is the recorded owner, or for an encrypted file without one, the owner
    /// in its header. Deletion goes on past a failure; the keys are destroyed in any case.
    /// - Returns: the absolute paths deleted, sorted.
    /// - Throws: 104 for the unmanaged identity (it is not an account); otherwise the first failure, after
    ///   everything else was done.
    @discardableResult
    public func removeFiles(ownedBy identity: Identity) throws(ProtectionError) -> [String] {
        guard !identity.isUnmanaged else {
            throw .invalidIdentity(reason: "the unmanaged identity is not an account; nothing is wiped for it")
        }
        var removed: [String] = []
        var forgotten: [stat] = []
        var firstError: ProtectionError?
        var visited = Set<String>()
        for root in roots {
            walk(root, visited: &visited, directory: { path, info in
                do throws(ProtectionError) {
                    guard try owners.owner(path: path, info: info) == identity else { return }
                    try owners.setOwner(nil, path: path)
                } catch {
                    if case .invalidIdentity = error { return }
                    if firstError == nil { firstError = error }
                }
            }) { path, info in
                do throws(ProtectionError) {
                    guard try owner(forWipeOf: path, info: info) == identity else { return }
                    try POSIX.unlinkPath(path)
                    removed.append(path)
                    forgotten.append(info)
                } catch {
                    if case .fileNotFound = error { return }
                    if firstError == nil { firstError = error }
                }
            } onError: { error in
                if firstError == nil { firstError = error }
            }
        }
        for directory in Set(removed.map(Paths.parent)) {
            do throws(ProtectionError) { try POSIX.fsyncDirectory(directory) } catch {
                if firstError == nil { firstError = error }
            }
        }
        do throws(ProtectionError) { try owners.forget(forgotten) } catch {
            if firstError == nil { firstError = error }
        }
        do throws(ProtectionError) { try keyStore.destroyKeys(for: identity) } catch {
            if firstError == nil { firstError = error }
        }
        if let firstError { throw firstError }
        return removed.sorted()
    }

    private func owner(forWipeOf path: String, info: stat) throws(ProtectionError) -> Identity? {
        do throws(ProtectionError) {
            if let owner = try owners.owner(path: path, info: info) { return owner }
        } catch .invalidIdentity {
            // An unreadable recorded owner is no owner; fall through to the header.
        }
        do throws(ProtectionError) {
            return try encryptedHeader(path)?.owner
        } catch {
            if case .ioFailure = error { throw error }
            return nil
        }
    }

    /// Visits every directory (with `visitDirectory`) and every regular file (with `visit`) under `directory`,
    /// not following symbolic links, not entering the state directory.
    private func walk(
        _ directory: String, visited: inout Set<String>, directory visitDirectory: (String, stat) -> Void,
        _ visit: (String, stat) -> Void, onError: (ProtectionError) -> Void
    ) {
        guard !visited.contains(directory), directory != stateDirectory else { return }
        visited.insert(directory)
        let names: [String]
        do throws(ProtectionError) {
            guard let info = try POSIX.lstatPath(directory), POSIX.isDirectory(info) else { return }
            visitDirectory(directory, info)
            names = try POSIX.directoryEntries(directory)
        } catch {
            return onError(error)
        }
        for name in names.sorted() {
            let path = Paths.join(directory, name)
            do throws(ProtectionError) {
                guard let info = try POSIX.lstatPath(path) else { continue }
                if POSIX.isDirectory(info) {
                    walk(path, visited: &visited, directory: visitDirectory, visit, onError: onError)
                } else if POSIX.isRegular(info) {
                    visit(path, info)
                }
            } catch {
                onError(error)
            }
        }
    }
}
