import Foundation
import IdentityRuntime

extension DataProtectionManager {
    /// The asynchronous entry points, for Swift concurrency: the same operations, decisions and errors as the
    /// synchronous ones, but a key the store must fetch (a database, a network) is awaited instead of blocking
    /// the thread.
    ///
    /// ```swift
    /// let sealed = try await manager.async.protect(payload, owner: "alice@contoso.com")
    /// let plain = try await IdentityContext.withThreadIdentity("alice@contoso.com") {
    ///     try await manager.async.unprotect(sealed)
    /// }
    /// ```
    /// The caller's identity at the call decides, as in the synchronous API (`nil` owners mean the caller's
    /// `IdentityContext.effectiveFileIdentity`). With the key at hand (a local ``FileKeyStore``, a warm cache)
    /// the operation runs inline, on the caller's executor, without suspending.
    ///
    /// > Note: The synchronous methods stay for GCD blocks and operations. Called inside a Swift task on a
    /// > store that must wait, they block a cooperative thread: strict mode reports that
    /// > (`RuntimeIssue.blockingWaitInTask(operation:)`).
    public var async: AsyncOperations { AsyncOperations(manager: self) }

    /// ``DataProtectionManager``'s operations for Swift concurrency (see ``DataProtectionManager/async``).
    public struct AsyncOperations: Sendable {
        /// The manager whose operations these are.
        public let manager: DataProtectionManager

        /// ``DataProtectionManager/protect(_:owner:)-(Data,_)``, awaiting the key store.
        @inlinable
        public func protect(
            _ data: Data, owner: Identity? = nil, isolation: isolated (any Actor)? = #isolation
        ) async throws(ProtectionError) -> Data {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.protect(data, owner: owner) }
        }

        /// ``DataProtectionManager/unprotect(_:)-(Data)``, awaiting the key store.
        @inlinable
        public func unprotect(_ data: Data, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) -> Data {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.unprotect(data) }
        }

        /// ``DataProtectionManager/protect(_:owner:)-(String,_)``, awaiting the key store.
        @inlinable
        public func protect(
            _ string: String, owner: Identity? = nil, isolation: isolated (any Actor)? = #isolation
        ) async throws(ProtectionError) -> String {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.protect(string, owner: owner) }
        }

        /// ``DataProtectionManager/unprotect(_:)-(String)``, awaiting the key store.
        @inlinable
        public func unprotect(_ string: String, isolation: isolated (any Actor)? = #isolation) async throws(ProtectionError) -> String {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try manager.unprotect(string) }
        }

        /// ``DataProtectionManager/protect(_:owner:chunkSize:)``: the owner is checked and its key awaited at
        /// the call; the pieces are then produced as `source` is consumed.
        @inlinable
        public func protect<Source: AsyncSequence>(
            _ source: Source, owner: Identity? = nil, chunkSize: Int = 64 * 1024,
            isolation: isolated (any Actor)? = #isolation
        ) async throws(ProtectionError) -> ProtectedByteStream<Source> where Source.Element: Sequence<UInt8> {
            try await StoreBridge.withoutBlocking { () throws(ProtectionError) in
                try manager.protect(source, owner: owner, chunkSize: chunkSize)
            }
        }
    }
}
