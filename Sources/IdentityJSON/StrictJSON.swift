/// The package's one strict JSON reader (RFC 8259), in one pass over the bytes, and the writer of the objects
/// it reads back. It reads the JSON objects in a JWS header and JWT claims (IdentityAssertions: the verifier's
/// replacement for `JSONSerialization` followed by `JSONDecoder`, two parses and a `Data` copy each, which
/// cost more than the signature check itself), JWKS documents, and policy documents and runtime settings
/// (IdentityPolicy's `AppConfigurationValue`, with ``Limits/document``).
///
/// Stricter than `JSONSerialization` and `JSONDecoder`, never looser:
/// - the text is one JSON object (or, with ``value(_:limits:)``, one JSON value), optionally surrounded by JSON
///   white space (space, tab, LF, CR), in UTF-8 (no UTF-16 or UTF-32 detection; a byte-order mark only with
///   ``Limits/allowsByteOrderMark``); invalid UTF-8 in a string is refused;
/// - a member name that occurs twice is refused (RFC 7515 §5.2, RFC 7519 §4: a parser that keeps the last
///   one and a parser that keeps the first would disagree on what was signed);
/// - strings: no unescaped control characters, only the escapes of RFC 8259 §7, `\u` surrogates only in
///   valid pairs;
/// - numbers follow the grammar of RFC 8259 §6; ``Value/integer(_:)`` only for an integer without fraction or
///   exponent that fits `Int64` (a claim such as `exp` given as `1.8e9` is refused as malformed); with
///   ``Limits/keepsEverything`` every number is a ``Value/number(_:)``, and one that is not a finite `Double`
///   (`1e400`) is refused;
/// - nesting deeper than ``maximumDepth`` is refused (or the depth of the ``Limits`` given).
/// Member values the verifier does not read are checked for syntax, then dropped (``Value/other``). A reader
/// of JWKS documents (`AssertionKeySet`) asks for nested objects too (``Limits/keepsObjects``), and for limits
/// on the length of strings and numbers; a reader of documents (``Limits/document``) keeps every value.
package enum StrictJSON {
    package enum Value: Equatable, Sendable {
        case string(String)
        case integer(Int64)
        /// An array whose elements are all strings (e.g. `aud`).
        case strings([String])
        case null
        /// A nested object (only with ``Limits/keepsObjects``; else ``other``).
        case object([String: Value])
        /// A non-empty array whose elements are all objects (only with ``Limits/keepsObjects``; else ``other``).
        case objects([[String: Value]])
        /// Any other value (a boolean, a non-integer number, an object, an array with a non-string), unless
        /// ``Limits/keepsEverything``.
        case other
        /// A boolean (only with ``Limits/keepsEverything``; else ``other``).
        case bool(Bool)
        /// A number, whatever its form (only with ``Limits/keepsEverything``, and then for every number).
        case number(Double)
        /// An array, whatever its elements (only with ``Limits/keepsEverything``, and then for every array).
        case array([Value])
    }

    /// The nesting a token's header and claims may have.
    package static let maximumDepth = 16

    /// What the reader accepts beyond the grammar.
    package struct Limits: Sendable {
        /// Objects and arrays nested deeper than this are refused.
        package var maximumDepth: Int
        /// Strings (member names and values) longer than this many bytes, as written, are refused.
        package var maximumStringLength: Int
        /// Numbers longer than this many characters are refused.
        package var maximumNumberLength: Int
        /// Numbers other than integers that fit `Int64` (a fraction, an exponent, more digits) are refused.
        package var integersOnly: Bool
        /// Nested objects are kept (``Value/object(_:)``, ``Value/objects(_:)``) instead of dropped.
        package var keepsObjects: Bool
        /// Every value is kept as written: booleans (``Value/bool(_:)``), every number (``Value/number(_:)``),
        /// every array (``Value/array(_:)``) and every object (``Value/object(_:)``); nothing is ``Value/other``.
        package var keepsEverything: Bool
        /// A UTF-8 byte-order mark before the text is skipped instead of refused.
        package var allowsByteOrderMark: Bool
        /// A comma after an object's last member or an array's last element is skipped instead of refused
        /// (`{"a": 1,}` reads as `{"a": 1}`), as `JSONDecoder` reads documents.
        package var allowsTrailingCommas: Bool

        package init(
            maximumDepth: Int = StrictJSON.maximumDepth, maximumStringLength: Int = .max, maximumNumberLength: Int = .max,
            integersOnly: Bool = false, keepsObjects: Bool = false, keepsEverything: Bool = false,
            allowsByteOrderMark: Bool = false, allowsTrailingCommas: Bool = false
        ) {
            self.maximumDepth = maximumDepth
            self.maximumStringLength = maximumStringLength
            self.maximumNumberLength = maximumNumberLength
            self.integersOnly = integersOnly
            self.keepsObjects = keepsObjects || keepsEverything
            self.keepsEverything = keepsEverything
            self.allowsByteOrderMark = allowsByteOrderMark
            self.allowsTrailingCommas = allowsTrailingCommas
        }

        /// A token's header and claims: the token's own length bounds everything.
        package static let token = Limits()

        /// A document a person writes (a policy document, the runtime settings): every value kept, nesting up
        /// to 512 levels (as `JSONSerialization`), a UTF-8 byte-order mark and trailing commas skipped (as
        /// `JSONDecoder` does, which read these documents before).
        package static let document = Limits(
            maximumDepth: 512, keepsEverything: true, allowsByteOrderMark: true, allowsTrailingCommas: true)
    }

    /// The members of the object `bytes` holds, or the reason it is refused (for IdentityAssertions'
    /// `AssertionError.malformed(_:)`).
    package static func object(_ bytes: [UInt8], limits: Limits = .token) -> Result<[String: Value], Failure> {
        read(bytes, limits: limits, as: "object") { (reader: inout Reader) throws(Failure) in
            guard reader.peek() == UInt8(ascii: "{") else { throw Failure("not a JSON object") }
            return try reader.readObject(depth: 1)
        }
    }

    /// The one JSON value `bytes` holds, whatever its type, or the reason it is refused.
    package static func value(_ bytes: [UInt8], limits: Limits = .document) -> Result<Value, Failure> {
        read(bytes, limits: limits, as: "value") { (reader: inout Reader) throws(Failure) in try reader.readValue(depth: 0) }
    }

    /// A document read for a person to fix: its value, or where and why the reader stopped; and the members
    /// of its top-level object with the byte offsets of their names and values, those read before a failure
    /// included (each of them passed the grammar: a failure later in the text does not make them guesses).
    package struct Document {
        /// One member of the top-level object, in the order written (a name written twice is listed twice).
        package struct Member {
            package var name: String
            package var value: Value
            /// The byte offset of the member's name (its opening quote).
            package var nameOffset: Int
            /// The byte offset of the member's value (its first byte).
            package var valueOffset: Int
        }

        /// The value, or why it was refused.
        package var value: Result<Value, Failure>
        /// The members of the top-level object read before the reader stopped (every one when it did not fail).
        package var members: [Member]
        /// The byte offset at which the reader stopped: where it found the failure, or the end of the text.
        package var stoppedAt: Int
    }

    /// The one JSON value `bytes` holds, read as ``value(_:limits:)`` reads it, with the positions of the
    /// top-level object's members and of a failure (for errors that say where a document is wrong).
    package static func document(_ bytes: [UInt8], limits: Limits = .document) -> Document {
        bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer, limits: limits)
            reader.topLevel = []
            let value: Result<Value, Failure>
            do throws(Failure) {
                reader.skipByteOrderMark()
                reader.skipWhiteSpace()
                let result = try reader.readValue(depth: 0)
                reader.skipWhiteSpace()
                guard reader.index == buffer.count else { throw Failure("text after the JSON value") }
                value = .success(result)
            } catch {
                value = .failure(error)
            }
            return Document(value: value, members: reader.topLevel ?? [], stoppedAt: min(reader.index, buffer.count))
        }
    }

    /// What `body` reads from `bytes` after a byte-order mark (if the limits allow one) and white space; text
    /// after it, other than white space, is refused.
    private static func read<Read>(
        _ bytes: [UInt8], limits: Limits, as kind: String, _ body: (inout Reader) throws(Failure) -> Read
    ) -> Result<Read, Failure> {
        bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer, limits: limits)
            do throws(Failure) {
                reader.skipByteOrderMark()
                reader.skipWhiteSpace()
                let result = try body(&reader)
                reader.skipWhiteSpace()
                guard reader.index == buffer.count else { throw Failure("text after the JSON \(kind)") }
                return .success(result)
            } catch {
                return .failure(error)
            }
        }
    }

    /// Why a text is refused, in words.
    package struct Failure: Error, Equatable, CustomStringConvertible {
        package let description: String
        package init(_ description: String) { self.description = description }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        let limits: Limits
        var index = 0
        /// The top-level object's members as they are read, when recorded (``StrictJSON/document(_:limits:)``).
        var topLevel: [Document.Member]?

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipByteOrderMark() {
            guard limits.allowsByteOrderMark, bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF else { return }
            index = 3
        }

        mutating func skipWhiteSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func expect(_ byte: UInt8) throws(Failure) {
            guard index < bytes.count, bytes[index] == byte else {
                throw Failure("expected '\(Character(Unicode.Scalar(byte)))' at byte \(index)")
            }
            index += 1
        }

        /// The object starting at `index` (at `{`), with duplicate names refused.
        mutating func readObject(depth: Int) throws(Failure) -> [String: Value] {
            guard depth <= limits.maximumDepth else { throw Failure("nested deeper than \(limits.maximumDepth)") }
            try expect(UInt8(ascii: "{"))
            var members: [String: Value] = [:]
            skipWhiteSpace()
            if peek() == UInt8(ascii: "}") {
                index += 1
                return members
            }
            while true {
                skipWhiteSpace()
                let nameOffset = index
                let name = try readString()
                skipWhiteSpace()
                try expect(UInt8(ascii: ":"))
                skipWhiteSpace()
                let valueOffset = index
                let value = try readValue(depth: depth)
                if depth == 1, topLevel != nil {
                    topLevel?.append(Document.Member(name: name, value: value, nameOffset: nameOffset, valueOffset: valueOffset))
                }
                guard members.updateValue(value, forKey: name) == nil else {
                    throw Failure("member \(String(reflecting: name)) occurs twice")
                }
                skipWhiteSpace()
                guard let next = peek() else { throw Failure("unterminated object") }
                // Refused before the byte is consumed, so that the reader stops at the offending byte.
                guard next == UInt8(ascii: "}") || next == UInt8(ascii: ",") else { throw Failure("expected ',' or '}' at byte \(index)") }
                index += 1
                if next == UInt8(ascii: "}") { return members }
                if skipsTrailingComma(before: UInt8(ascii: "}")) { return members }
            }
        }

        /// After a comma: with ``Limits/allowsTrailingCommas``, whether `closing` follows (white space skipped),
        /// then consumed.
        mutating func skipsTrailingComma(before closing: UInt8) -> Bool {
            guard limits.allowsTrailingCommas else { return false }
            skipWhiteSpace()
            guard peek() == closing else { return false }
            index += 1
            return true
        }

        mutating func readValue(depth: Int) throws(Failure) -> Value {
            guard let first = peek() else { throw Failure("a value is missing") }
            switch first {
            case UInt8(ascii: "\""):
                return .string(try readString())
            case UInt8(ascii: "{"):
                let members = try readObject(depth: depth + 1)
                return limits.keepsObjects ? .object(members) : .other
            case UInt8(ascii: "["):
                return try readArray(depth: depth + 1)
            case UInt8(ascii: "t"):
                try readLiteral("true")
                return limits.keepsEverything ? .bool(true) : .other
            case UInt8(ascii: "f"):
                try readLiteral("false")
                return limits.keepsEverything ? .bool(false) : .other
            case UInt8(ascii: "n"):
                try readLiteral("null")
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try readNumber()
            default:
                throw Failure("unexpected byte \(first) at \(index)")
            }
        }

        mutating func readLiteral(_ literal: StaticString) throws(Failure) {
            let count = literal.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw Failure("truncated literal") }
            for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] {
                throw Failure("invalid literal at byte \(index)")
            }
            index += count
        }

        mutating func readArray(depth: Int) throws(Failure) -> Value {
            guard depth <= limits.maximumDepth else { throw Failure("nested deeper than \(limits.maximumDepth)") }
            try expect(UInt8(ascii: "["))
            var strings: [String]? = []
            var objects: [[String: Value]]? = limits.keepsObjects ? [] : nil
            var elements: [Value]? = limits.keepsEverything ? [] : nil
            skipWhiteSpace()
            if peek() == UInt8(ascii: "]") {
                index += 1
                return elements.map(Value.array) ?? .strings([])
            }
            while true {
                skipWhiteSpace()
                let element = try readValue(depth: depth)
                elements?.append(element)
                switch element {
                case let .string(element):
                    strings?.append(element)
                    objects = nil
                case let .object(members):
                    objects?.append(members)
                    strings = nil
                default:
                    strings = nil
                    objects = nil
                }
                skipWhiteSpace()
                guard let next = peek() else { throw Failure("unterminated array") }
                guard next == UInt8(ascii: "]") || next == UInt8(ascii: ",") else { throw Failure("expected ',' or ']' at byte \(index)") }
                index += 1
                if next == UInt8(ascii: "]") {
                    return elements.map(Value.array) ?? strings.map(Value.strings) ?? objects.map(Value.objects) ?? .other
                }
                if skipsTrailingComma(before: UInt8(ascii: "]")) {
                    return elements.map(Value.array) ?? strings.map(Value.strings) ?? objects.map(Value.objects) ?? .other
                }
            }
        }

        /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        mutating func readNumber() throws(Failure) -> Value {
            let start = index
            var negative = false
            if peek() == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            guard let lead = peek(), lead >= UInt8(ascii: "0"), lead <= UInt8(ascii: "9") else { throw Failure("invalid number at byte \(start)") }
            var magnitude: UInt64 = 0
            var fits = true
            if lead == UInt8(ascii: "0") {
                index += 1
            } else {
                while let digit = peek(), digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") {
                    let (times, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (sum, overflow2) = times.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
                    if overflow1 || overflow2 { fits = false }
                    magnitude = sum
                    index += 1
                }
            }
            var integral = true
            if peek() == UInt8(ascii: ".") {
                integral = false
                index += 1
                try readDigits()
            }
            if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
                integral = false
                index += 1
                if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
                try readDigits()
            }
            guard index - start <= limits.maximumNumberLength else {
                throw Failure("a number longer than \(limits.maximumNumberLength) characters at byte \(start)")
            }
            if limits.keepsEverything {
                // The grammar was checked above, so the standard library reads every text that gets here.
                guard let number = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)),
                      number.isFinite else {
                    throw Failure("a number out of the range of a Double at byte \(start)")
                }
                return .number(number)
            }
            guard integral, fits else {
                if limits.integersOnly { throw Failure("a number that is not a 64-bit integer at byte \(start)") }
                return .other
            }
            if negative {
                guard magnitude <= UInt64(Int64.max) + 1 else {
                    if limits.integersOnly { throw Failure("a number that is not a 64-bit integer at byte \(start)") }
                    return .other
                }
                return .integer(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude))
            }
            guard magnitude <= UInt64(Int64.max) else {
                if limits.integersOnly { throw Failure("a number that is not a 64-bit integer at byte \(start)") }
                return .other
            }
            return .integer(Int64(magnitude))
        }

        mutating func readDigits() throws(Failure) {
            let start = index
            while let digit = peek(), digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") { index += 1 }
            guard index > start else { throw Failure("a digit is missing at byte \(start)") }
        }

        /// A string at `index` (at `"`), unescaped and checked to be valid UTF-8.
        mutating func readString() throws(Failure) -> String {
            try expect(UInt8(ascii: "\""))
            let start = index
            // Fast path: no escapes.
            while index < bytes.count {
                let byte = bytes[index]
                guard index - start < limits.maximumStringLength || byte == UInt8(ascii: "\"") else {
                    throw Failure("a string longer than \(limits.maximumStringLength) bytes at byte \(start)")
                }
                if byte == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    guard let text else { throw Failure("a string is not valid UTF-8") }
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                guard byte >= 0x20 else { throw Failure("a control character in a string at byte \(index)") }
                index += 1
            }
            var unescaped = Array(bytes[start..<index])
            while index < bytes.count {
                guard index - start <= limits.maximumStringLength else {
                    throw Failure("a string longer than \(limits.maximumStringLength) bytes at byte \(start)")
                }
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: unescaped, as: UTF8.self) else {
                        throw Failure("a string is not valid UTF-8")
                    }
                    return text
                case UInt8(ascii: "\\"):
                    guard let escape = peek() else { throw Failure("unterminated escape") }
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): unescaped.append(escape)
                    case UInt8(ascii: "b"): unescaped.append(0x08)
                    case UInt8(ascii: "f"): unescaped.append(0x0C)
                    case UInt8(ascii: "n"): unescaped.append(0x0A)
                    case UInt8(ascii: "r"): unescaped.append(0x0D)
                    case UInt8(ascii: "t"): unescaped.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try readHex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard peek() == UInt8(ascii: "\\") else { throw Failure("a lone surrogate") }
                            index += 1
                            guard peek() == UInt8(ascii: "u") else { throw Failure("a lone surrogate") }
                            index += 1
                            let low = try readHex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw Failure("a lone surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(scalar) {
                            throw Failure("a lone surrogate")
                        }
                        guard let character = Unicode.Scalar(scalar) else { throw Failure("an invalid \\u escape") }
                        unescaped.append(contentsOf: UTF8.encode(character)!)
                    default:
                        throw Failure("an invalid escape at byte \(index - 1)")
                    }
                default:
                    guard byte >= 0x20 else { throw Failure("a control character in a string at byte \(index - 1)") }
                    unescaped.append(byte)
                }
            }
            throw Failure("unterminated string")
        }

        mutating func readHex4() throws(Failure) -> UInt32 {
            guard index + 4 <= bytes.count else { throw Failure("a truncated \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw Failure("an invalid \\u escape")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }
    }
}

extension StrictJSON {
    /// A member value the signer writes.
    package enum Written {
        case string(String)
        case integer(Int64)
    }

    /// The compact JSON object of `members`, in the order given (the signer lists them sorted by name, as JWS
    /// libraries do). Strings are escaped as RFC 8259 §7 requires and no more: `"` and `\`, the control
    /// characters (`\b \f \n \r \t`, others as `\u00XX`); `/` and non-ASCII characters are written as they are,
    /// in UTF-8. The output is what ``object(_:)`` reads back member for member. The signer's replacement for
    /// `JSONSerialization`, which cost more than the Ed25519 signature itself.
    package static func objectBytes(_ members: [(name: String, value: Written)]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(members.reduce(2) { $0 + $1.name.utf8.count + 24 + ($1.value.stringLength ?? 0) })
        out.append(UInt8(ascii: "{"))
        for (index, member) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendString(member.name, to: &out)
            out.append(UInt8(ascii: ":"))
            switch member.value {
            case let .string(text): appendString(text, to: &out)
            case let .integer(number): out.append(contentsOf: String(number).utf8)
            }
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    private static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension StrictJSON.Written {
    fileprivate var stringLength: Int? {
        if case let .string(text) = self { text.utf8.count } else { nil }
    }
}
