/// Why ``Identity/init(validating:)`` rejected a name.
public enum IdentityValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The name is longer than ``Identity/maximumUTF8Length`` bytes of UTF-8.
    case tooLong(utf8Length: Int, limit: Int)
    /// The name starts or ends with white space or a newline.
    case surroundingWhitespace
    /// The name contains a control, format, separator, private-use, surrogate or unassigned scalar
    /// (`scalar` is its value, `offset` its position in Unicode scalars).
    case forbiddenCharacter(scalar: UInt32, offset: Int)

    public var description: String {
        switch self {
        case let .tooLong(length, limit):
            return "identity is \(length) bytes of UTF-8; at most \(limit) are allowed"
        case .surroundingWhitespace:
            return "identity starts or ends with white space"
        case let .forbiddenCharacter(scalar, offset):
            let hex = String(scalar, radix: 16, uppercase: true)
            return "identity contains the invisible or control character U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex) at scalar offset \(offset)"
        }
    }
}
