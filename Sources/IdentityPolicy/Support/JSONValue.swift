import Foundation

/// A JSON value as written, with no coercions: `true` is not `1`, `1` is not `"1"`. The base of the strict
/// readers of settings files and policy documents.
public enum JSONValue: Sendable, Hashable, Decodable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
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

    /// Parses `data` as one JSON object.
    static func parseObject(_ data: Data) throws(JSONReadError) -> [String: JSONValue] {
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw .malformed(String(describing: error))
        }
        guard case let .object(members) = value else { throw .notAnObject(found: value.typeName) }
        return members
    }
}

/// Why a JSON document could not be read, before its keys are looked at.
enum JSONReadError: Error {
    case malformed(String)
    case notAnObject(found: String)
}
