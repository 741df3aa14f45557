/// Why a policy document, or the directory holding them, could not be used.
///
/// A document that cannot be used never leaves the accounts it may govern unmanaged (<doc:AccountsAndPolicies>):
/// its last good version stays in force; without one, the account or tenant it names is undecided (its data
/// refused with `ProtectionError.policyUnavailable`) and, when not even that can be read, every account
/// without a good document of its own is.
///
/// Each error about a document names its file (``path``), the ``position`` of the offending key or value (of
/// the place the reader stopped, for text that is not JSON) and the ``key``; ``description`` reads
/// `path:line:column: key: message`, as compilers write theirs.
public enum PolicyDocumentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The policy directory is missing or cannot be listed; every policy read before stays in force.
    case directoryUnreadable(path: String, reason: String)
    /// The document could not be read.
    case unreadable(path: String, reason: String)
    /// The document is not JSON; `position`: where the reader stopped.
    case malformedJSON(path: String, reason: String, position: PolicyDocumentPosition? = nil)
    /// The top level is not a JSON object.
    case notAnObject(path: String, found: String, position: PolicyDocumentPosition? = nil)
    /// A key that a policy document does not have; `known` lists the valid ones.
    case unknownKey(path: String, key: String, known: [String], position: PolicyDocumentPosition? = nil)
    /// A required key is missing; `position`: the document's top-level object.
    case missingKey(path: String, key: String, position: PolicyDocumentPosition? = nil)
    /// A value of the wrong JSON type.
    case wrongType(path: String, key: String, expected: String, found: String, position: PolicyDocumentPosition? = nil)
    /// A value of the right type that is not allowed (an unknown location name, a bad account name, an
    /// unsupported `formatVersion`...).
    case invalidValue(path: String, key: String, reason: String, position: PolicyDocumentPosition? = nil)
    /// Another document (`otherPath`) already gives the policy of the same account or tenant.
    case duplicate(path: String, subject: String, otherPath: String)

    /// The document (or directory) the error is about.
    public var path: String {
        switch self {
        case let .directoryUnreadable(path, _), let .unreadable(path, _), let .malformedJSON(path, _, _),
            let .notAnObject(path, _, _), let .unknownKey(path, _, _, _), let .missingKey(path, _, _),
            let .wrongType(path, _, _, _, _), let .invalidValue(path, _, _, _), let .duplicate(path, _, _):
            path
        }
    }

    /// Where in the document the error is, when it is about the document's text.
    public var position: PolicyDocumentPosition? {
        switch self {
        case .directoryUnreadable, .unreadable, .duplicate: nil
        case let .malformedJSON(_, _, position), let .notAnObject(_, _, position), let .unknownKey(_, _, _, position),
            let .missingKey(_, _, position), let .wrongType(_, _, _, _, position), let .invalidValue(_, _, _, position):
            position
        }
    }

    /// The key the error is about, when it is about one.
    public var key: String? {
        switch self {
        case .directoryUnreadable, .unreadable, .malformedJSON, .notAnObject, .duplicate: nil
        case let .unknownKey(_, key, _, _), let .missingKey(_, key, _), let .wrongType(_, key, _, _, _), let .invalidValue(_, key, _, _):
            key
        }
    }

    /// What is wrong, without the path, position and key.
    public var message: String {
        switch self {
        case let .directoryUnreadable(_, reason): "the policy directory cannot be read (\(reason)); the last good policies stay in force"
        case let .unreadable(_, reason): "cannot read the policy document: \(reason)"
        case let .malformedJSON(_, reason, _): "not valid JSON: \(reason)"
        case let .notAnObject(_, found, _): "a policy document must be a JSON object, found \(found)"
        case let .unknownKey(_, _, known, _): "unknown key; known keys: \(known.joined(separator: ", "))"
        case .missingKey: "missing key"
        case let .wrongType(_, _, expected, found, _): "must be \(expected), found \(found)"
        case let .invalidValue(_, _, reason, _): reason
        case let .duplicate(_, subject, otherPath): "\(subject) already has a policy in \(otherPath); this document is ignored"
        }
    }

    /// `path:line:column: key: message` (the parts that apply).
    public var description: String {
        var text = path
        if let position { text += ":\(position.line):\(position.column)" }
        if let key { text += ": \(String(reflecting: key))" }
        return text + ": " + message
    }
}
