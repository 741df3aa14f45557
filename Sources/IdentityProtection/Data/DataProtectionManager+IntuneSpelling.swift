import Foundation
import IdentityRuntime

// The Intune App SDK's `protect:identity:` spelling of the data call, for code ported from it. It is the same
// call as `protect(_:owner:)`, not an older one: it has no default for the owner, so a call that passes none
// (`protect(data)`) means `protect(_:owner:)`, never both. The streamed and `.async` forms have one spelling.

extension DataProtectionManager {
    /// Protects `data` for `identity`: the same call as ``protect(_:owner:)-(Data,_)``, under the Intune App SDK's
    /// label (`protect:identity:`) for code ported from it.
    ///
    /// The header names `identity` as the owner; for a managed identity the body is encrypted. `identity` is the
    /// owner of new data only and never widens what the caller may do.
    /// - Throws: as ``protect(_:owner:)-(Data,_)``.
    public func protect(_ data: Data, identity: Identity?) throws(ProtectionError) -> Data {
        try protect(data, owner: identity)
    }

    /// Protects `string` for `identity`: the same call as ``protect(_:owner:)-(String,_)``, under the Intune App
    /// SDK's label.
    /// - Throws: as ``protect(_:owner:)-(String,_)``.
    public func protect(_ string: String, identity: Identity?) throws(ProtectionError) -> String {
        try protect(string, owner: identity)
    }
}
