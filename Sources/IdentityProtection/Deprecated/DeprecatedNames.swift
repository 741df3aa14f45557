import Foundation
import IdentityRuntime

// `protect(_:identity:)`, the label the data calls had before `owner:`: kept, deprecated, because code written
// against that spelling is common; every other earlier name is gone.

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
