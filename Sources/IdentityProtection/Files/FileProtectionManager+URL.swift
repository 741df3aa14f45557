import Foundation
import IdentityRuntime

// Every path-taking operation of `FileProtectionManager` takes a file `URL` too, as `FileManager` does:
// `atPath:` (and `toPath:`) for a `String`, `at:` (and `to:`) for a `URL`. The URL form is the path form
// applied to the URL's path: same decisions, same errors. A URL that is not a file URL of this host names no
// file in the file system and is refused with `ProtectionError.fileNotFound(path:)` (105), its
// `absoluteString` as the path, before anything is read, written or asked of the policy.

extension URL {
    /// The file-system path (percent-decoded) of a file URL of this host, resolved against its base URL when
    /// it has one; ``ProtectionError/fileNotFound(path:)`` (105) for any other URL: `https:`, `data:`, a
    /// reference without a scheme, or a `file:` URL that names another host (`file://server/share/a.txt`,
    /// which is not the local `/share/a.txt`).
    func protectionFilePath() throws(ProtectionError) -> String {
        let url = absoluteURL
        guard url.isFileURL else { throw .fileNotFound(path: redactedString) }
        if let host = url.host(percentEncoded: false), !host.isEmpty, host.lowercased() != "localhost" {
            throw .fileNotFound(path: redactedString)
        }
        let path = url.path(percentEncoded: false)
        // A NUL (`%00`) would end the path early at the system call: another file than the one named.
        guard !path.isEmpty, !path.utf8.contains(0) else { throw .fileNotFound(path: redactedString) }
        return path
    }

    /// The URL as an error names it: without a user name or password.
    private var redactedString: String {
        guard user(percentEncoded: true) != nil || password(percentEncoded: true) != nil,
              var components = URLComponents(url: self, resolvingAgainstBaseURL: true) else { return absoluteString }
        components.user = nil
        components.password = nil
        return components.string ?? "\(scheme ?? "url"):(a URL with credentials)"
    }
}

extension FileProtectionManager {
    /// A manager for files under `roots` (file URLs), keeping its state in `stateDirectory` (a file URL): the
    /// initializer that takes paths, given the URLs' paths.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as the
    ///   path form.
    public convenience init(
        roots: [URL], keyStore: any KeyStore, policy: any ManagedIdentityPolicy, stateDirectory: URL,
        ownerStorage: OwnerStorage = .automatic, chunkSize: Int = 64 * 1024
    ) throws(ProtectionError) {
        var paths: [String] = []
        for root in roots { paths.append(try root.protectionFilePath()) }
        try self.init(
            roots: paths, keyStore: keyStore, policy: policy, stateDirectory: try stateDirectory.protectionFilePath(),
            ownerStorage: ownerStorage, chunkSize: chunkSize)
    }

    /// Adds the directory at the file URL `url` as a protected root (``addRoot(_:)-(String)``).
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL.
    public func addRoot(_ url: URL) throws(ProtectionError) {
        addRoot(try url.protectionFilePath())
    }

    /// ``protect(atPath:owner:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``protect(atPath:owner:)``.
    public func protect(at url: URL, owner: Identity? = nil) throws(ProtectionError) {
        try protect(atPath: try url.protectionFilePath(), owner: owner)
    }

    /// ``protectionInfo(atPath:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``protectionInfo(atPath:)``.
    public func protectionInfo(at url: URL) throws(ProtectionError) -> ProtectionInfo? {
        try protectionInfo(atPath: try url.protectionFilePath())
    }

    /// ``isFileEncrypted(atPath:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``isFileEncrypted(atPath:)``.
    public func isFileEncrypted(at url: URL) throws(ProtectionError) -> Bool {
        try isFileEncrypted(atPath: try url.protectionFilePath())
    }

    /// ``encryptFile(atPath:owner:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``encryptFile(atPath:owner:)``.
    public func encryptFile(at url: URL, owner: Identity? = nil) throws(ProtectionError) {
        try encryptFile(atPath: try url.protectionFilePath(), owner: owner)
    }

    /// ``decryptFile(atPath:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``decryptFile(atPath:)``.
    public func decryptFile(at url: URL) throws(ProtectionError) {
        try decryptFile(atPath: try url.protectionFilePath())
    }

    /// ``decryptFile(atPath:toPath:)`` from the file URL `url` to the file URL `copyURL`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) when either URL is not a file URL; otherwise as
    ///   ``decryptFile(atPath:toPath:)``.
    public func decryptFile(at url: URL, to copyURL: URL) throws(ProtectionError) {
        try decryptFile(atPath: try url.protectionFilePath(), toPath: try copyURL.protectionFilePath())
    }

    /// ``protectDirectory(atPath:owner:)`` for the directory at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``protectDirectory(atPath:owner:)``.
    public func protectDirectory(at url: URL, owner: Identity? = nil) throws(ProtectionError) {
        try protectDirectory(atPath: try url.protectionFilePath(), owner: owner)
    }

    /// ``ownerOfDirectory(atPath:)`` for the directory at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``ownerOfDirectory(atPath:)``.
    public func ownerOfDirectory(at url: URL) throws(ProtectionError) -> Identity? {
        try ownerOfDirectory(atPath: try url.protectionFilePath())
    }

    /// ``writeFile(atPath:contents:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``writeFile(atPath:contents:)``.
    public func writeFile(at url: URL, contents: Data) throws(ProtectionError) {
        try writeFile(atPath: try url.protectionFilePath(), contents: contents)
    }

    /// ``readFile(atPath:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``readFile(atPath:)``.
    public func readFile(at url: URL) throws(ProtectionError) -> Data {
        try readFile(atPath: try url.protectionFilePath())
    }

    /// ``openFile(atPath:options:permissions:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``openFile(atPath:options:permissions:)``.
    public func openFile(at url: URL, options: FileOpenOptions, permissions: UInt16 = 0o644) throws(ProtectionError) -> FileHandle {
        try openFile(atPath: try url.protectionFilePath(), options: options, permissions: permissions)
    }

    /// ``openProtectedFile(atPath:options:owner:permissions:)`` for the file at the file URL `url`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``openProtectedFile(atPath:options:owner:permissions:)``.
    public func openProtectedFile(
        at url: URL, options: FileOpenOptions = [.read, .write], owner: Identity? = nil, permissions: UInt16 = 0o600
    ) throws(ProtectionError) -> ProtectedFile {
        try openProtectedFile(atPath: try url.protectionFilePath(), options: options, owner: owner, permissions: permissions)
    }

    /// ``protect(atPath:toPath:owner:chunkSize:)`` from the file URL `url` to the file URL `destinationURL`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) when either URL is not a file URL; otherwise as
    ///   ``protect(atPath:toPath:owner:chunkSize:)``.
    public func protect(at url: URL, to destinationURL: URL, owner: Identity? = nil, chunkSize: Int? = nil) throws(ProtectionError) {
        try protect(
            atPath: try url.protectionFilePath(), toPath: try destinationURL.protectionFilePath(), owner: owner,
            chunkSize: chunkSize)
    }

    /// ``unprotect(atPath:toPath:)`` from the file URL `url` to the file URL `destinationURL`.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) when either URL is not a file URL; otherwise as
    ///   ``unprotect(atPath:toPath:)``.
    public func unprotect(at url: URL, to destinationURL: URL) throws(ProtectionError) {
        try unprotect(atPath: try url.protectionFilePath(), toPath: try destinationURL.protectionFilePath())
    }
}

extension ProtectedFile {
    /// Opens or creates the file at the file URL `url` through `manager`, as
    /// ``init(atPath:options:owner:permissions:manager:)``.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   the path form.
    public convenience init(
        at url: URL, options: FileOpenOptions = [.read, .write], owner: Identity? = nil,
        permissions: UInt16 = 0o600, manager: FileProtectionManager
    ) throws(ProtectionError) {
        try self.init(atPath: try url.protectionFilePath(), options: options, owner: owner, permissions: permissions, manager: manager)
    }
}

extension FileKeyStore {
    /// Opens (creating it when missing, mode `0700`) the key directory at the file URL `url`, as
    /// ``init(atPath:)``.
    /// - Throws: ``ProtectionError/fileNotFound(path:)`` (105) for a URL that is not a file URL; otherwise as
    ///   ``init(atPath:)``.
    public convenience init(at url: URL) throws(ProtectionError) {
        try self.init(atPath: try url.protectionFilePath())
    }
}
