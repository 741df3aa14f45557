import Foundation
import IdentityProtection
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Key-encryption keys held in memory, read from a file or an environment variable: the simplest
/// ``KeyEncryptionKeyProvider``. Wrapping is AES-256-GCM through `IdentityProtection.KeyWrapping`.
///
/// The text form is one or more `ID:BASE64` entries separated by commas, spaces or newlines, each `BASE64`
/// 32 bytes; the **first** entry is the current KEK, the others are older KEKs kept to read keys wrapped
/// under them:
///
/// ```text
/// kek-2026-11:3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,kek-2026-05:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
/// ```
///
/// ```swift
/// let keks = try StaticKeyEncryptionKeys(environmentVariable: "IDENTITY_KEK")
/// let store = PostgresKeyStore(fleet: fleet, keyEncryptionKeys: keks)
/// ```
///
/// > Warning: Keep the KEK out of the database and out of logs; a file holding it must not be readable by the
/// > group or others (``init(file:)`` refuses one that is).
public struct StaticKeyEncryptionKeys: KeyEncryptionKeyProvider {
    /// Why a KEK list could not be read.
    public enum LoadError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The environment variable is not set or empty.
        case missingVariable(String)
        /// The file could not be read (`errno`), or is readable by the group or others (`reason`).
        case unreadableFile(path: String, reason: String)
        /// An entry that is not `ID:BASE64` with 32 bytes, or a repeated id (`entry` is the entry's index; the
        /// key bytes are never quoted).
        case malformedEntry(index: Int, reason: String)
        /// No entry at all.
        case empty

        public var description: String {
            switch self {
            case let .missingVariable(name): "the environment variable \(name) holding the key-encryption keys is not set"
            case let .unreadableFile(path, reason): "\(path): \(reason)"
            case let .malformedEntry(index, reason): "key-encryption key entry \(index): \(reason)"
            case .empty: "no key-encryption key given"
            }
        }
    }

    public let currentKeyEncryptionKeyID: String
    private let keys: [String: [UInt8]]

    /// KEKs by id, `current` being the one new keys are wrapped under.
    public init(current: String, keys: [String: [UInt8]]) throws(LoadError) {
        guard let key = keys[current] else { throw .malformedEntry(index: 0, reason: "the current id \(current) has no key") }
        for (id, bytes) in keys where bytes.count != KeyWrapping.keyEncryptionKeyByteCount {
            throw .malformedEntry(index: 0, reason: "\(id): a key-encryption key is \(KeyWrapping.keyEncryptionKeyByteCount) bytes, not \(bytes.count)")
        }
        _ = key
        self.currentKeyEncryptionKeyID = current
        self.keys = keys
    }

    /// Parses the text form described above.
    public init(text: String) throws(LoadError) {
        let entries = text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" })
        guard !entries.isEmpty else { throw .empty }
        var keys: [String: [UInt8]] = [:]
        var first: String?
        for (index, entry) in entries.enumerated() {
            guard let colon = entry.firstIndex(of: ":") else { throw .malformedEntry(index: index, reason: "expected ID:BASE64") }
            let id = String(entry[..<colon])
            guard !id.isEmpty else { throw .malformedEntry(index: index, reason: "empty id") }
            guard let bytes = Data(base64Encoded: String(entry[entry.index(after: colon)...])) else {
                throw .malformedEntry(index: index, reason: "not base64")
            }
            guard bytes.count == KeyWrapping.keyEncryptionKeyByteCount else {
                throw .malformedEntry(index: index, reason: "\(bytes.count) bytes; a key-encryption key is \(KeyWrapping.keyEncryptionKeyByteCount)")
            }
            guard keys[id] == nil else { throw .malformedEntry(index: index, reason: "id \(id) given twice") }
            keys[id] = Array(bytes)
            if first == nil { first = id }
        }
        try self.init(current: first!, keys: keys)
    }

    /// Reads the text form from the environment variable `name`.
    public init(
        environmentVariable name: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(LoadError) {
        guard let text = environment[name], !text.isEmpty else { throw .missingVariable(name) }
        try self.init(text: text)
    }

    /// Reads the text form from the file at `path`, which must not be readable or writable by the group or
    /// others (mode `0600` or `0400`).
    public init(file path: String) throws(LoadError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw .unreadableFile(path: path, reason: String(cString: strerror(errno)))
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .unreadableFile(path: path, reason: "mode \(String(info.st_mode & 0o777, radix: 8)) lets the group or others read the key-encryption keys; use 0600")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .unreadableFile(path: path, reason: "cannot be read")
        }
        try self.init(text: String(decoding: data, as: UTF8.self))
    }

    /// The ids of every KEK held, current first.
    public var keyEncryptionKeyIDs: [String] {
        [currentKeyEncryptionKeyID] + keys.keys.filter { $0 != currentKeyEncryptionKeyID }.sorted()
    }

    public func wrap(_ key: ProtectionKey, context: [UInt8]) throws(ProtectionError) -> (keyEncryptionKeyID: String, wrapped: [UInt8]) {
        let id = currentKeyEncryptionKeyID
        return (id, try KeyWrapping.wrap(key, under: keys[id]!, context: context + Array(id.utf8)))
    }

    public func unwrap(
        _ wrapped: [UInt8], keyID: ProtectionKeyID, keyEncryptionKeyID: String, context: [UInt8]
    ) throws(ProtectionError) -> ProtectionKey {
        guard let kek = keys[keyEncryptionKeyID] else {
            throw PostgresFleetError.unknownKeyEncryptionKey(id: keyEncryptionKeyID).protectionError
        }
        return try KeyWrapping.unwrap(wrapped, id: keyID, under: kek, context: context + Array(keyEncryptionKeyID.utf8))
    }
}
