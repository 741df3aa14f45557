/// Why settings could not be loaded. Loading never ignores a key it does not know or a value of the wrong type.
public enum RuntimeSettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file could not be read.
    case unreadable(path: String, reason: String)
    /// The text is not JSON.
    case malformedJSON(reason: String)
    /// The top level is not a JSON object.
    case notAnObject(found: String)
    /// A key that is not a setting (typos included); `known` lists the valid keys.
    case unknownKey(String, known: [String])
    /// A value of the wrong JSON type.
    case wrongType(key: String, expected: String, found: String)
    /// A value of the right type outside its range.
    case invalidValue(key: String, reason: String)

    public var description: String {
        switch self {
        case let .unreadable(path, reason): "cannot read settings file \(path): \(reason)"
        case let .malformedJSON(reason): "settings are not valid JSON: \(reason)"
        case let .notAnObject(found): "settings must be a JSON object, found \(found)"
        case let .unknownKey(key, known): "unknown settings key \(String(reflecting: key)); known keys: \(known.joined(separator: ", "))"
        case let .wrongType(key, expected, found): "settings key \(String(reflecting: key)) must be \(expected), found \(found)"
        case let .invalidValue(key, reason): "settings key \(String(reflecting: key)): \(reason)"
        }
    }
}
