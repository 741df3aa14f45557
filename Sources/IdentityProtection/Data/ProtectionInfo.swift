import IdentityRuntime

/// What protection data or a file carries: its owner and whether (and with which key) it is encrypted.
public struct ProtectionInfo: Sendable, Hashable, CustomStringConvertible {
    /// The owner identity recorded in the header, extended attribute or index.
    public let owner: Identity
    /// Whether the content is encrypted (AES-256-GCM) for ``owner``.
    public let isEncrypted: Bool
    /// The owner's key the content is encrypted with; `nil` when it is not encrypted.
    public let keyID: ProtectionKeyID?
    /// The envelope or file format version; `nil` for a plain file whose owner lives in an extended attribute
    /// or the index.
    public let formatVersion: UInt8?

    /// Makes a description of protection.
    public init(owner: Identity, isEncrypted: Bool, keyID: ProtectionKeyID?, formatVersion: UInt8?) {
        self.owner = owner
        self.isEncrypted = isEncrypted
        self.keyID = keyID
        self.formatVersion = formatVersion
    }

    public var description: String {
        "ProtectionInfo(owner: \(owner.debugDescription), encrypted: \(isEncrypted)\(keyID.map { ", key: \($0)" } ?? ""))"
    }
}
