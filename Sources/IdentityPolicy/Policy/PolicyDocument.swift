import Foundation
import IdentityJSON
import IdentityRuntime

/// One JSON policy document: the policy of one managed account, or of every account of one tenant (named by
/// its tenant ID, or by its domain: the part of the account name after `@`). The format is described in
/// <doc:AccountsAndPolicies>.
public struct PolicyDocument: Sendable, Hashable {
    /// Who the document applies to.
    public enum Subject: Sendable, Hashable, CustomStringConvertible {
        /// One managed account.
        case account(Identity)
        /// A tenant ID such as `72f988bf-86f1-41af-91ab-2d7cd011db47`, or a domain such as `contoso.com`,
        /// compared case-insensitively.
        case tenant(TenantID)

        public var description: String {
            switch self {
            case let .account(identity): "account \(identity.name)"
            case let .tenant(tenant): "tenant \(tenant.rawValue)"
            }
        }
    }

    /// Whom the document governs.
    public var subject: Subject
    /// The policy, with `identity` unset (it is filled in for the account asking).
    public var policy: Policy

    /// The current (and only) format version.
    public static let formatVersion = 1

    /// Every key a document may contain.
    public static let keys: [String] = [
        "account", "accountBlocked", "appConfiguration", "appSharingAllowed", "dataTransfer", "fileEncryptionRequired", "formatVersion",
        "notificationPolicy", "openFromLocations", "openFromUnknownLocationAllowed", "pinRequired",
        "saveToLocations", "saveToUnknownLocationAllowed", "tenant",
    ]

    /// A document giving `policy` to `subject`.
    public init(subject: Subject, policy: Policy) {
        self.subject = subject
        self.policy = policy
    }

    /// What reading a document gave: the document, or why it cannot be used and whom it may govern.
    public enum Reading: Sendable, Hashable {
        /// The document parsed.
        case document(PolicyDocument)
        /// The document cannot be used. `subjects`: the accounts and tenants it names, as far as they can
        /// still be read (its `account` and `tenant` members, from the raw JSON even when other keys are bad,
        /// or when the text stops being JSON after them); empty when not even that can be read.
        case broken(PolicyDocumentError, subjects: Set<Subject>)
    }

    /// Parses the document in `data`; `path` names it in errors.
    public init(json data: Data, path: String) throws(PolicyDocumentError) {
        switch Self.read(json: data, path: path) {
        case let .document(document): self = document
        case let .broken(error, _): throw error
        }
    }

    /// Reads the document in `data` (`path` names it in errors): the document, or its first error (with the
    /// position of the key or value at fault, or of the place the text stops being JSON) and the subjects it
    /// names. Every ``PolicySource`` that reads documents reads them here, and ``PolicySet/assembled(from:broken:)``
    /// turns the subjects of broken ones into undecided accounts and tenants.
    public static func read(json data: Data, path: String) -> Reading {
        let bytes = Array(data)
        let read = StrictJSON.document(bytes, limits: .document)
        let members = read.members.map { member in
            Member(name: member.name, value: AppConfigurationValue(member.value), nameOffset: member.nameOffset, valueOffset: member.valueOffset)
        }
        let subjects = salvagedSubjects(members)
        let reader = Reader(members: members, path: path, bytes: bytes)
        do throws(PolicyDocumentError) {
            switch read.value {
            case let .failure(failure):
                throw .malformedJSON(path: path, reason: failure.description, position: reader.position(at: read.stoppedAt))
            case let .success(value):
                guard case .object = value else {
                    let start = bytes.firstIndex { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) } ?? 0
                    throw .notAnObject(path: path, found: AppConfigurationValue(value).typeName, position: reader.position(at: start))
                }
            }
            return .document(try PolicyDocument(reader))
        } catch {
            return .broken(error, subjects: subjects)
        }
    }

    /// The accounts and tenants named by the `account` and `tenant` members read, or none when one of them
    /// cannot be read as a name (the document's subject is then unknown).
    private static func salvagedSubjects(_ members: [Member]) -> Set<Subject> {
        var subjects: Set<Subject> = []
        for member in members where member.name == "account" || member.name == "tenant" {
            // An invalid name is no subject at all: the caller then treats the document's subject as unknown,
            // which refuses more, never less, so the validation error itself is not needed here.
            guard case let .string(text) = member.value, let identity = try? Identity(validating: text), !identity.isUnmanaged else {
                return []
            }
            if member.name == "account" {
                subjects.insert(.account(identity))
            } else {
                guard !text.contains("@") else { return [] }
                subjects.insert(.tenant(TenantID(identity.name)))
            }
        }
        return subjects
    }

    private init(_ reader: Reader) throws(PolicyDocumentError) {
        let path = reader.path
        for member in reader.members where !Self.keys.contains(member.name) {
            throw .unknownKey(path: path, key: member.name, known: Self.keys, position: reader.position(at: member.nameOffset))
        }
        guard let version = try reader.number("formatVersion") else {
            throw .missingKey(path: path, key: "formatVersion", position: reader.objectPosition)
        }
        guard version == Double(Self.formatVersion) else {
            throw .invalidValue(
                path: path, key: "formatVersion", reason: "unsupported version \(AppConfigurationValue.number(version)); this runtime reads version \(Self.formatVersion)",
                position: reader.position(of: "formatVersion"))
        }
        switch (try reader.string("account"), try reader.string("tenant")) {
        case let (account?, nil):
            let identity = try reader.identity("account", account)
            subject = .account(identity)
        case let (nil, tenant?):
            guard !tenant.contains("@") else {
                throw .invalidValue(
                    path: path, key: "tenant", reason: "a tenant is a tenant ID or a domain such as contoso.com, not an account",
                    position: reader.position(of: "tenant"))
            }
            subject = .tenant(TenantID(try reader.identity("tenant", tenant).name))
        case (.some, .some):
            throw .invalidValue(path: path, key: "tenant", reason: "a document names an account or a tenant, not both", position: reader.position(of: "tenant"))
        case (nil, nil):
            throw .missingKey(path: path, key: "account", position: reader.objectPosition)
        }
        var policy = Policy(identity: nil)
        policy.allowedSaveLocations = SaveLocation(rawValue: try reader.names("saveToLocations", SaveLocation.names).reduce(0) { $0 | $1.rawValue })
        policy.allowedOpenLocations = OpenLocation(rawValue: try reader.names("openFromLocations", OpenLocation.names).reduce(0) { $0 | $1.rawValue })
        policy.isSaveToUnknownLocationAllowed = try reader.bool("saveToUnknownLocationAllowed") ?? false
        policy.isOpenFromUnknownLocationAllowed = try reader.bool("openFromUnknownLocationAllowed") ?? false
        policy.isFileEncryptionRequired = try reader.bool("fileEncryptionRequired") ?? true
        policy.isAppSharingAllowed = try reader.bool("appSharingAllowed") ?? false
        policy.isPINRequired = try reader.bool("pinRequired") ?? false
        policy.isAccountBlocked = try reader.bool("accountBlocked") ?? false
        if let name = try reader.string("dataTransfer") {
            guard let level = DataTransferLevel.names.first(where: { $0.0 == name })?.1 else {
                throw .invalidValue(
                    path: path, key: "dataTransfer", reason: "\(String(reflecting: name)) is not one of none, sameTenant, managedAccounts, any",
                    position: reader.position(of: "dataTransfer"))
            }
            policy.dataTransfer = level
        }
        if let name = try reader.string("notificationPolicy") {
            guard let value = NotificationPolicy.names.first(where: { $0.0 == name })?.1 else {
                throw .invalidValue(
                    path: path, key: "notificationPolicy", reason: "\(String(reflecting: name)) is not one of allow, blockOrgData, block",
                    position: reader.position(of: "notificationPolicy"))
            }
            policy.notificationPolicy = value
        }
        if let configuration = reader.value("appConfiguration") {
            guard case let .object(values) = configuration else {
                throw .wrongType(
                    path: path, key: "appConfiguration", expected: "an object", found: configuration.typeName,
                    position: reader.position(of: "appConfiguration"))
            }
            policy.appConfiguration = values
        }
        self.policy = policy
    }

    /// A top-level member and where it is written.
    private struct Member {
        var name: String
        var value: AppConfigurationValue
        var nameOffset: Int
        var valueOffset: Int
    }

    private struct Reader {
        let members: [Member]
        let path: String
        let bytes: [UInt8]

        /// The member named `key` (the reader is used only for text that parsed, with no name twice).
        func member(_ key: String) -> Member? {
            members.first { $0.name == key }
        }

        func value(_ key: String) -> AppConfigurationValue? {
            member(key)?.value
        }

        func position(at offset: Int) -> PolicyDocumentPosition {
            PolicyDocumentPosition(offset: offset, in: bytes)
        }

        /// The position of the value of `key`.
        func position(of key: String) -> PolicyDocumentPosition? {
            member(key).map { position(at: $0.valueOffset) }
        }

        /// The position of the top-level object (its `{`), for a key it lacks.
        var objectPosition: PolicyDocumentPosition {
            position(at: bytes.firstIndex(of: UInt8(ascii: "{")) ?? 0)
        }

        func bool(_ key: String) throws(PolicyDocumentError) -> Bool? {
            guard let value = value(key) else { return nil }
            guard case let .bool(flag) = value else {
                throw .wrongType(path: path, key: key, expected: "a boolean", found: value.typeName, position: position(of: key))
            }
            return flag
        }

        func number(_ key: String) throws(PolicyDocumentError) -> Double? {
            guard let value = value(key) else { return nil }
            guard case let .number(number) = value else {
                throw .wrongType(path: path, key: key, expected: "a number", found: value.typeName, position: position(of: key))
            }
            return number
        }

        func string(_ key: String) throws(PolicyDocumentError) -> String? {
            guard let value = value(key) else { return nil }
            guard case let .string(text) = value else {
                throw .wrongType(path: path, key: key, expected: "a string", found: value.typeName, position: position(of: key))
            }
            return text
        }

        func identity(_ key: String, _ name: String) throws(PolicyDocumentError) -> Identity {
            let identity: Identity
            do {
                identity = try Identity(validating: name)
            } catch {
                throw .invalidValue(path: path, key: key, reason: "\(String(reflecting: name)) is not a valid name: \(error)", position: position(of: key))
            }
            guard !identity.isUnmanaged else { throw .invalidValue(path: path, key: key, reason: "the name is empty", position: position(of: key)) }
            return identity
        }

        func names<Element>(_ key: String, _ table: [(String, Element)]) throws(PolicyDocumentError) -> [Element] {
            guard let value = value(key) else { return [] }
            guard case let .array(items) = value else {
                throw .wrongType(path: path, key: key, expected: "an array of location names", found: value.typeName, position: position(of: key))
            }
            var result: [Element] = []
            for item in items {
                guard case let .string(name) = item else {
                    throw .wrongType(path: path, key: key, expected: "an array of location names", found: "an array containing \(item.typeName)", position: position(of: key))
                }
                guard let element = table.first(where: { $0.0 == name })?.1 else {
                    throw .invalidValue(path: path, key: key, reason: "unknown location \(String(reflecting: name)); known: \(table.map(\.0).joined(separator: ", "))", position: position(of: key))
                }
                result.append(element)
            }
            return result
        }
    }
}
