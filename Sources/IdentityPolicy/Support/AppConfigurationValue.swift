import Foundation
import IdentityJSON

/// A value of a policy's app configuration (``Policy/appConfiguration``): a JSON value as written, with no
/// coercions: `true` is not `1`, `1` is not `"1"`. Also the base of the strict readers of settings files and
/// policy documents.
public enum AppConfigurationValue: Sendable, Hashable, Decodable, CustomStringConvertible {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, as a `Double`.
    case number(Double)
    /// A string.
    case string(String)
    /// An array, in order.
    case array([AppConfigurationValue])
    /// An object, by member name.
    case object([String: AppConfigurationValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Each failed decode tries the next JSON type; a value of none of them throws below.
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([AppConfigurationValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: AppConfigurationValue].self))
        }
    }

    /// The JSON type name, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    public var description: String {
        switch self {
        case .null: "null"
        case let .bool(value): String(value)
        case let .number(value): value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        case let .string(value): String(reflecting: value)
        case let .array(values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        case let .object(members):
            "{" + members.sorted { $0.key < $1.key }.map { "\(String(reflecting: $0.key)): \($0.value)" }.joined(separator: ", ") + "}"
        }
    }

    /// Parses `data` as one JSON object, with the package's strict reader (`StrictJSON` with its `document` limits):
    /// a member name given twice, invalid UTF-8, a lone surrogate, a number out of the range of a `Double` and
    /// nesting deeper than 512 levels are `JSONReadError.malformed`.
    static func parseObject(_ data: Data) throws(JSONReadError) -> [String: AppConfigurationValue] {
        switch StrictJSON.value(Array(data), limits: .document) {
        case let .failure(failure):
            throw .malformed(failure.description)
        case let .success(value):
            let value = AppConfigurationValue(value)
            guard case let .object(members) = value else { throw .notAnObject(found: value.typeName) }
            return members
        }
    }

    /// The value the strict reader read with `keepsEverything`, which never gives `other`.
    init(_ value: StrictJSON.Value) {
        switch value {
        case .null: self = .null
        case .other: preconditionFailure("a reader that keeps every value gave `other`")
        case let .bool(flag): self = .bool(flag)
        case let .number(number): self = .number(number)
        case let .integer(number): self = .number(Double(number))
        case let .string(text): self = .string(text)
        case let .strings(texts): self = .array(texts.map(AppConfigurationValue.string))
        case let .array(elements): self = .array(elements.map(AppConfigurationValue.init))
        case let .object(members): self = .object(members.mapValues(AppConfigurationValue.init))
        case let .objects(objects): self = .array(objects.map { .object($0.mapValues(AppConfigurationValue.init)) })
        }
    }
}

/// Why a JSON document could not be read, before its keys are looked at.
enum JSONReadError: Error {
    case malformed(String)
    case notAnObject(found: String)
}
