import Foundation
import IdentityRuntime

extension FileProtectionManager {
    /// The asynchronous entry points, for Swift concurrency: every operation that may need a key, with the
    /// same decisions and errors as the synchronous one, but a key the store must fetch (a database, a
    /// network) is awaited instead of blocking the thread.
    ///
    /// ```swift
    /// try await files.async.writeFile(atPath: "/data/alice/report.txt", contents: report)
    /// let file = try await files.async.openProtectedFile(atPath: "/data/alice/log", options: [.read, .write, .create])
    /// ```
    /// The caller's identity at the call decides, as in the synchronous API. With the key at hand (a local
    /// ``FileKeyStore``, a warm cache) the operation runs inline, on the caller's executor, without suspending.
    /// An operation that had to fetch a key runs again once the key is there; as every operation here leaves
    /// nothing behind when it fails (atomic writes, removed temporary files), the outcome is the one the
    /// synchronous call would have had.
    ///
    /// > Note: The file I/O itself is synchronous, as in the synchronous API; only the waits on the key store
    /// > are awaited.
    public var async: AsyncOperations { AsyncOperations(manager: self) }

    /// ``FileProtectionManager``'s operations for Swift concurrency (see ``FileProtectionManager/async``).
    public struct AsyncOperations: Sendable {
        /// The manager whose operations these are.
        public let manager: FileProtectionManager

        /// How long a wipe waits for the key store to destroy each account's keys (the store's own timeouts
        /// bound each of its calls too).
        public static let keyDestructionTimeout: Duration = .seconds(60)

        /// ``FileProtectionManager/protect(atPath:owner:)``, awaiting the key store.
        @inlinable
        public func protect(atPath path: String, owner: Identity? = nil, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.protect(atPath: path, owner: owner) }
        }

        /// ``FileProtectionManager/encryptFile(atPath:owner:)``, awaiting the key store.
        @inlinable
        public func encryptFile(atPath path: String, owner: Identity? = nil, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.encryptFile(atPath: path, owner: owner) }
        }

        /// ``FileProtectionManager/decryptFile(atPath:)``, awaiting the key store.
        @inlinable
        public func decryptFile(atPath path: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.decryptFile(atPath: path) }
        }

        /// ``FileProtectionManager/decryptFile(atPath:toPath:)``, awaiting the key store.
        @inlinable
        public func decryptFile(atPath path: String, toPath copyPath: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.decryptFile(atPath: path, toPath: copyPath) }
        }

        /// ``FileProtectionManager/writeFile(atPath:contents:)``, awaiting the key store.
        @inlinable
        public func writeFile(atPath path: String, contents: Data, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.writeFile(atPath: path, contents: contents) }
        }

        /// ``FileProtectionManager/readFile(atPath:)``, awaiting the key store.
        @inlinable
        public func readFile(atPath path: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) -> Data {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.readFile(atPath: path) }
        }

        /// ``FileProtectionManager/openProtectedFile(atPath:options:owner:permissions:)``, awaiting the key store.
        /// The handle's reads and writes need no store: its key came with the open.
        @inlinable
        public func openProtectedFile(
            atPath path: String, options: FileOpenOptions = [.read, .write], owner: Identity? = nil,
            permissions: UInt16 = 0o600, isolation: isolated (any Actor)? = #isolation
        ) async throws(ProtectionError) -> ProtectedFile {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in
                try manager.openProtectedFile(atPath: path, options: options, owner: owner, permissions: permissions)
            }
        }

        /// ``FileProtectionManager/protect(atPath:toPath:owner:chunkSize:)``, awaiting the key store.
        @inlinable
        public func protect(
            atPath sourcePath: String, toPath destinationPath: String, owner: Identity? = nil,
            chunkSize: Int? = nil, isolation: isolated (any Actor)? = #isolation
        ) async throws(ProtectionError) {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in
                try manager.protect(atPath: sourcePath, toPath: destinationPath, owner: owner, chunkSize: chunkSize)
            }
        }

        /// ``FileProtectionManager/unprotect(atPath:toPath:)``, awaiting the key store.
        @inlinable
        public func unprotect(atPath sourcePath: String, toPath destinationPath: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in
                try manager.unprotect(atPath: sourcePath, toPath: destinationPath)
            }
        }

        /// ``FileProtectionManager/removeFiles(ownedBy:)``: the files go as in the synchronous call (on a GCD
        /// thread: the removal waits for creations in flight, which may be asynchronous operations awaiting a
        /// key, and walks the roots), then the keys are destroyed through the key store's asynchronous
        /// requirement (at most ``keyDestructionTimeout`` for all of them).
        @discardableResult
        public func removeFiles(ownedBy identity: Identity, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) -> [String] {
            guard !identity.isUnmanaged else {
                throw .invalidIdentity(reason: "the unmanaged identity is not an account; nothing is wiped for it")
            }
            return try await removeFiles(ownedByAnyOf: [identity])[identity] ?? []
        }

        /// ``FileProtectionManager/removeFiles(ownedByAnyOf:)``, destroying the keys asynchronously.
        @discardableResult
        public func removeFiles(ownedByAnyOf accounts: Set<Identity>, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) -> [Identity: [String]] {
            try manager.authorizeRemoval(of: accounts)
            return try await manager.removeFilesAsPolicy(ownedByAnyOf: accounts, keysBy: .now + Self.keyDestructionTimeout)
        }
    }
}
