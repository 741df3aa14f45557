import Foundation
import IdentityRuntime

extension FileProtectionManager.AsyncOperations {
    /// ``FileProtectionManager/protect(at:owner:)``, awaiting the key store.
    @inlinable
    public func protect(at url: URL, owner: Identity? = nil, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.protect(at: url, owner: owner) }
    }

    /// ``FileProtectionManager/encryptFile(at:owner:)``, awaiting the key store.
    @inlinable
    public func encryptFile(at url: URL, owner: Identity? = nil, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.encryptFile(at: url, owner: owner) }
    }

    /// ``FileProtectionManager/decryptFile(at:)``, awaiting the key store.
    @inlinable
    public func decryptFile(at url: URL, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.decryptFile(at: url) }
    }

    /// ``FileProtectionManager/decryptFile(at:to:)``, awaiting the key store.
    @inlinable
    public func decryptFile(at url: URL, to copyURL: URL, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.decryptFile(at: url, to: copyURL) }
    }

    /// ``FileProtectionManager/writeFile(at:contents:)``, awaiting the key store.
    @inlinable
    public func writeFile(at url: URL, contents: Data, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.writeFile(at: url, contents: contents) }
    }

    /// ``FileProtectionManager/readFile(at:)``, awaiting the key store.
    @inlinable
    public func readFile(at url: URL, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) -> Data {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.readFile(at: url) }
    }

    /// ``FileProtectionManager/openProtectedFile(at:options:owner:permissions:)``, awaiting the key store.
    /// The handle's reads and writes need no store: its key came with the open.
    @inlinable
    public func openProtectedFile(
        at url: URL, options: FileOpenOptions = [.read, .write], owner: Identity? = nil,
        permissions: UInt16 = 0o600, isolation: isolated (any Actor)? = #isolation
    ) async throws(ProtectionError) -> ProtectedFile {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in
            try manager.openProtectedFile(at: url, options: options, owner: owner, permissions: permissions)
        }
    }

    /// ``FileProtectionManager/protect(at:to:owner:chunkSize:)``, awaiting the key store.
    @inlinable
    public func protect(
        at url: URL, to destinationURL: URL, owner: Identity? = nil, chunkSize: Int? = nil,
        isolation: isolated (any Actor)? = #isolation
    ) async throws(ProtectionError) {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in
            try manager.protect(at: url, to: destinationURL, owner: owner, chunkSize: chunkSize)
        }
    }

    /// ``FileProtectionManager/unprotect(at:to:)``, awaiting the key store.
    @inlinable
    public func unprotect(at url: URL, to destinationURL: URL, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
        try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.unprotect(at: url, to: destinationURL) }
    }
}
