import Foundation
import IdentityRuntime

/// One JSON policy document: the policy of one managed account, or of every account of one tenant (named by
/// its tenant ID, or by its domain: the part of the account name after `@`). The format is described in
/// <doc:AccountsAndPolicies>.
public struct PolicyDocument: Sendable, Hashable {
    /// Who the document applies to.
    public enum Subject: Sendable, Hashable, CustomStringConvertible {
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

    public init(subject: Subject, policy: Policy) {
        self.subject = subject
        self.policy = policy
    }

    /// Parses the document in `data`; `path` names it in errors.
    public init(json data: Data, path: String) throws(PolicyDocumentError) {
        let members: [String: AppConfigurationValue]
        do throws(JSONReadError) {
            members = try AppConfigurationValue.parseObject(data)
        } catch {
            switch error {
            case let .malformed(reason): throw .malformedJSON(path: path, reason: reason)
            case let .notAnObject(found): throw .notAnObject(path: path, found: found)
            }
        }
        for key in members.keys.sorted() where !Self.keys.contains(key) {
            throw .unknownKey(path: path, key: key, known: Self.keys)
        }
        let reader = Reader(members: members, path: path)
        guard let version = try reader.number("formatVersion") else { throw .missingKey(path: path, key: "formatVersion") }
        guard version == Double(Self.formatVersion) else {
            throw .invalidValue(path: path, key: "formatVersion", reason: "unsupported version \(version); this runtime reads version \(Self.formatVersion)")
        }
        switch (try reader.string("account"), try reader.string("tenant")) {
        case let (account?, nil):
            let identity = try reader.identity("account", account)
            subject = .account(identity)
        case let (nil, tenant?):
            guard !tenant.contains("@") else {
                throw .invalidValue(path: path, key: "tenant", reason: "a tenant is a tenant ID or a domain such as contoso.com, not an account")
            }
            subject = .tenant(TenantID(try reader.identity("tenant", tenant).name))
        case (.some, .some):
            throw .invalidValue(path: path, key: "tenant", reason: "a document names an account or a tenant, not both")
        case (nil, nil):
            throw .missingKey(path: path, key: "account")
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
                throw .invalidValue(path: path, key: "dataTransfer", reason: "\(String(reflecting: name)) is not one of none, sameTenant, managedAccounts, any")
            }
            policy.dataTransfer = level
        }
        if let name = try reader.string("notificationPolicy") {
            guard let value = NotificationPolicy.names.first(where: { $0.0 == name })?.1 else {
                throw .invalidValue(path: path, key: "notificationPolicy", reason: "\(String(reflecting: name)) is not one of allow, blockOrgData, block")
            }
            policy.notificationPolicy = value
        }
        if let configuration = members["appConfiguration"] {
            guard case let .object(values) = configuration else {
                throw .wrongType(path: path, key: "appConfiguration", expected: "an object", found: configuration.typeName)
            }
            policy.appConfiguration = values
        }
        self.policy = policy
    }

    private struct Reader {
        let members: [String: AppConfigurationValue]
        let path: String

        func bool(_ key: String) throws(PolicyDocumentError) -> Bool? {
            guard let value = members[key] else { return nil }
            guard case let .bool(flag) = value else { throw .wrongType(path: path, key: key, expected: "a boolean", found: value.typeName) }
            return flag
        }

        func number(_ key: String) throws(PolicyDocumentError) -> Double? {
            guard let value = members[key] else { return nil }
            guard case let .number(number) = value else { throw .wrongType(path: path, key: key, expected: "a number", found: value.typeName) }
            return number
        }

        func string(_ key: String) throws(PolicyDocumentError) -> String? {
            guard let value = members[key] else { return nil }
            guard case let .string(text) = value else { throw .wrongType(path: path, key: key, expected: "a string", found: value.typeName) }
            return text
        }

        func identity(_ key: String, _ name: String) throws(PolicyDocumentError) -> Identity {
            let identity: Identity
            do {
                identity = try Identity(validating: name)
            } catch {
                throw .invalidValue(path: path, key: key, reason: "\(String(reflecting: name)) is not a valid name: \(error)")
            }
            guard !identity.isUnmanaged else { throw .invalidValue(path: path, key: key, reason: "the name is empty") }
            return identity
        }

        func names<Element>(_ key: String, _ table: [(String, Element)]) throws(PolicyDocumentError) -> [Element] {
            guard let value = members[key] else { return [] }
            guard case let .array(items) = value else {
                throw .wrongType(path: path, key: key, expected: "an array of location names", found: value.typeName)
            }
            var result: [Element] = []
            for item in items {
                guard case let .string(name) = item else {
                    throw .wrongType(path: path, key: key, expected: "an array of location names", found: "an array containing \(item.typeName)")
                }
                guard let element = table.first(where: { $0.0 == name })?.1 else {
                    throw .invalidValue(path: path, key: key, reason: "unknown location \(String(reflecting: name)); known: \(table.map(\.0).joined(separator: ", "))")
                }
                result.append(element)
            }
            return result
        }
    }
}
