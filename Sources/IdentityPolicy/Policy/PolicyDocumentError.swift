/// Why a policy document, or the directory holding them, could not be used. The last good policy of the
/// affected account stays in force.
public enum PolicyDocumentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The policy directory is missing or cannot be listed; every policy read before stays in force.
    case directoryUnreadable(path: String, reason: String)
    /// The document could not be read.
    case unreadable(path: String, reason: String)
    /// The document is not JSON.
    case malformedJSON(path: String, reason: String)
    /// The top level is not a JSON object.
    case notAnObject(path: String, found: String)
    /// A key that a policy document does not have; `known` lists the valid ones.
    case unknownKey(path: String, key: String, known: [String])
    /// A required key is missing.
    case missingKey(path: String, key: String)
    /// A value of the wrong JSON type.
    case wrongType(path: String, key: String, expected: String, found: String)
    /// A value of the right type that is not allowed (an unknown location name, a bad account name...).
    case invalidValue(path: String, key: String, reason: String)
    /// Another document (`otherPath`) already gives the policy of the same account or tenant.
    case duplicate(path: String, subject: String, otherPath: String)

    /// The document (or directory) the error is about.
    public var path: String {
        switch self {
        case let .directoryUnreadable(path, _), let .unreadable(path, _), let .malformedJSON(path, _),
            let .notAnObject(path, _), let .unknownKey(path, _, _), let .missingKey(path, _),
            let .wrongType(path, _, _, _), let .invalidValue(path, _, _), let .duplicate(path, _, _):
            path
        }
    }

    public var description: String {
        switch self {
        case let .directoryUnreadable(path, reason): "policy directory \(path) cannot be read (\(reason)); the last good policies stay in force"
        case let .unreadable(path, reason): "\(path): cannot read the policy document: \(reason)"
        case let .malformedJSON(path, reason): "\(path): not valid JSON: \(reason)"
        case let .notAnObject(path, found): "\(path): a policy document must be a JSON object, found \(found)"
        case let .unknownKey(path, key, known): "\(path): unknown key \(String(reflecting: key)); known keys: \(known.joined(separator: ", "))"
        case let .missingKey(path, key): "\(path): missing key \(String(reflecting: key))"
        case let .wrongType(path, key, expected, found): "\(path): \(String(reflecting: key)) must be \(expected), found \(found)"
        case let .invalidValue(path, key, reason): "\(path): \(String(reflecting: key)): \(reason)"
        case let .duplicate(path, subject, otherPath): "\(path): \(subject) already has a policy in \(otherPath); this document is ignored"
        }
    }
}
