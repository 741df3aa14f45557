import Foundation
import IdentityRuntime

// The names the public API had before it settled on one vocabulary: `atPath:` (and `toPath:`) for a path,
// `at:` (and `to:`) for a file URL, `owner:` for the identity that owns new data. Each old name forwards to
// the new one, unchanged in behaviour, and is deprecated with a fix-it to it.

extension FileProtectionManager {
    /// Deprecated: ``protect(atPath:owner:)``.
    @available(*, deprecated, renamed: "protect(atPath:owner:)")
    public func protect(path: String, identity: Identity? = nil) throws(ProtectionError) {
        try protect(atPath: path, owner: identity)
    }

    /// Deprecated: ``protectionInfo(atPath:)``.
    @available(*, deprecated, renamed: "protectionInfo(atPath:)")
    public func protectionInfo(path: String) throws(ProtectionError) -> ProtectionInfo? {
        try protectionInfo(atPath: path)
    }

    /// Deprecated: ``isFileEncrypted(atPath:)``.
    @available(*, deprecated, renamed: "isFileEncrypted(atPath:)")
    public func isFileEncrypted(path: String) throws(ProtectionError) -> Bool {
        try isFileEncrypted(atPath: path)
    }

    /// Deprecated: ``encryptFile(atPath:owner:)``.
    @available(*, deprecated, renamed: "encryptFile(atPath:owner:)")
    public func encryptFile(path: String, for identity: Identity? = nil) throws(ProtectionError) {
        try encryptFile(atPath: path, owner: identity)
    }

    /// Deprecated: ``decryptFile(atPath:)``.
    @available(*, deprecated, renamed: "decryptFile(atPath:)")
    public func decryptFile(path: String) throws(ProtectionError) {
        try decryptFile(atPath: path)
    }

    /// Deprecated: ``decryptFile(atPath:toPath:)``.
    @available(*, deprecated, renamed: "decryptFile(atPath:toPath:)")
    public func decryptFile(path: String, toCopyPath copyPath: String) throws(ProtectionError) {
        try decryptFile(atPath: path, toPath: copyPath)
    }

    /// Deprecated: ``protectDirectory(atPath:owner:)``.
    @available(*, deprecated, renamed: "protectDirectory(atPath:owner:)")
    public func protect(directory path: String, identity: Identity? = nil) throws(ProtectionError) {
        try protectDirectory(atPath: path, owner: identity)
    }

    /// Deprecated: ``ownerOfDirectory(atPath:)``.
    @available(*, deprecated, renamed: "ownerOfDirectory(atPath:)")
    public func owner(ofDirectory path: String) throws(ProtectionError) -> Identity? {
        try ownerOfDirectory(atPath: path)
    }

    /// Deprecated: ``protect(atPath:toPath:owner:chunkSize:)``.
    @available(*, deprecated, renamed: "protect(atPath:toPath:owner:chunkSize:)")
    public func protect(
        fileAtPath sourcePath: String, toPath destinationPath: String, identity: Identity? = nil, chunkSize: Int? = nil
    ) throws(ProtectionError) {
        try protect(atPath: sourcePath, toPath: destinationPath, owner: identity, chunkSize: chunkSize)
    }

    /// Deprecated: ``unprotect(atPath:toPath:)``.
    @available(*, deprecated, renamed: "unprotect(atPath:toPath:)")
    public func unprotect(fileAtPath sourcePath: String, toPath destinationPath: String) throws(ProtectionError) {
        try unprotect(atPath: sourcePath, toPath: destinationPath)
    }
}

extension FileProtectionManager.AsyncOperations {
    /// Deprecated: ``protect(atPath:owner:isolation:)``.
    @available(*, deprecated, renamed: "protect(atPath:owner:isolation:)")
    public func protect(path: String, identity: Identity? = nil, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await protect(atPath: path, owner: identity)
    }

    /// Deprecated: ``encryptFile(atPath:owner:isolation:)``.
    @available(*, deprecated, renamed: "encryptFile(atPath:owner:isolation:)")
    public func encryptFile(path: String, for identity: Identity? = nil, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await encryptFile(atPath: path, owner: identity)
    }

    /// Deprecated: ``decryptFile(atPath:isolation:)``.
    @available(*, deprecated, renamed: "decryptFile(atPath:isolation:)")
    public func decryptFile(path: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await decryptFile(atPath: path)
    }

    /// Deprecated: ``decryptFile(atPath:toPath:isolation:)``.
    @available(*, deprecated, renamed: "decryptFile(atPath:toPath:isolation:)")
    public func decryptFile(path: String, toCopyPath copyPath: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await decryptFile(atPath: path, toPath: copyPath)
    }

    /// Deprecated: ``protect(atPath:toPath:owner:chunkSize:isolation:)``.
    @available(*, deprecated, renamed: "protect(atPath:toPath:owner:chunkSize:isolation:)")
    public func protect(
        fileAtPath sourcePath: String, toPath destinationPath: String, identity: Identity? = nil,
        chunkSize: Int? = nil, isolation: isolated (any Actor)? = #isolation
    ) async throws(ProtectionError) {
        try await protect(atPath: sourcePath, toPath: destinationPath, owner: identity, chunkSize: chunkSize)
    }

    /// Deprecated: ``unprotect(atPath:toPath:isolation:)``.
    @available(*, deprecated, renamed: "unprotect(atPath:toPath:isolation:)")
    public func unprotect(fileAtPath sourcePath: String, toPath destinationPath: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await unprotect(atPath: sourcePath, toPath: destinationPath)
    }
}

// The owner label of `DataProtectionManager`: the deprecated forms have no default for the owner, so a call
// that passes none (`protect(data)`) means the current form, never both.

extension DataProtectionManager {
    /// Deprecated: ``protect(_:owner:)-(Data,_)``.
    @available(*, deprecated, renamed: "protect(_:owner:)")
    public func protect(_ data: Data, identity: Identity?) throws(ProtectionError) -> Data {
        try protect(data, owner: identity)
    }

    /// Deprecated: ``protect(_:owner:)-(String,_)``.
    @available(*, deprecated, renamed: "protect(_:owner:)")
    public func protect(_ string: String, identity: Identity?) throws(ProtectionError) -> String {
        try protect(string, owner: identity)
    }

    /// Deprecated: ``protect(_:owner:chunkSize:)``.
    @available(*, deprecated, renamed: "protect(_:owner:chunkSize:)")
    public func protect<Source: AsyncSequence>(
        _ source: Source, identity: Identity?, chunkSize: Int = 64 * 1024
    ) throws(ProtectionError) -> ProtectedByteStream<Source> where Source.Element: Sequence<UInt8> {
        try protect(source, owner: identity, chunkSize: chunkSize)
    }
}

extension DataProtectionManager.AsyncOperations {
    /// Deprecated: ``protect(_:owner:isolation:)-(Data,_,_)``.
    @available(*, deprecated, renamed: "protect(_:owner:isolation:)")
    public func protect(
        _ data: Data, identity: Identity?, isolation: isolated (any Actor)? = #isolation
    ) async throws(ProtectionError) -> Data {
        try await protect(data, owner: identity)
    }

    /// Deprecated: ``protect(_:owner:isolation:)-(String,_,_)``.
    @available(*, deprecated, renamed: "protect(_:owner:isolation:)")
    public func protect(
        _ string: String, identity: Identity?, isolation: isolated (any Actor)? = #isolation
    ) async throws(ProtectionError) -> String {
        try await protect(string, owner: identity)
    }

    /// Deprecated: ``protect(_:owner:chunkSize:isolation:)``.
    @available(*, deprecated, renamed: "protect(_:owner:chunkSize:isolation:)")
    public func protect<Source: AsyncSequence>(
        _ source: Source, identity: Identity?, chunkSize: Int = 64 * 1024,
        isolation: isolated (any Actor)? = #isolation
    ) async throws(ProtectionError) -> ProtectedByteStream<Source> where Source.Element: Sequence<UInt8> {
        try await protect(source, owner: identity, chunkSize: chunkSize)
    }
}

extension FileKeyStore {
    /// Deprecated: ``init(atPath:)``.
    @available(*, deprecated, renamed: "init(atPath:)")
    public convenience init(directory: String) throws(ProtectionError) {
        try self.init(atPath: directory)
    }
}
