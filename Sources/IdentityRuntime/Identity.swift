/// An account on whose behalf work runs: a user principal name such as `user@contoso.com`.
///
/// Identities compare **case-insensitively with full Unicode case folding**, independent of any locale:
///
/// ```swift
/// Identity("USER@CONTOSO.COM") == Identity("user@contoso.com")   // true
/// Identity("Straße@contoso.com") == Identity("STRASSE@contoso.com") // true (ß folds to "ss")
/// ```
///
/// The comparison key is the name under Unicode full case folding (the default, locale-free folding of
/// `CaseFolding.txt`, status C and F, computed from the standard library's Unicode tables), compared under
/// canonical equivalence (Swift `String` equality). It folds `ß` and `ẞ` to `ss`, final sigma to sigma and
/// ligatures such as `ﬁ` to their letters, and never depends on the current locale: the Turkish dotless `ı`
/// stays distinct from `i`. Names of any length fold without failing. ``name`` keeps the spelling the identity was made
/// with, so the casing the runtime hands back may differ from the casing another caller used.
///
/// ## Unmanaged
/// ``unmanaged`` (the empty string) means "no user / an unknown personal account". It is a *value*: put in
/// an identity slot it stops the fall-through to the next level, unlike `nil`, which means "unset".
///
/// ## Input rules
/// - ``init(_:)`` accepts any string and never fails. It trims surrounding white space and newlines (they are
///   never part of a user principal name; a name read from a file with a trailing newline still matches), so
///   a name of only white space is ``unmanaged``. Everything else is kept as given; the protection module still
///   refuses to record data for a name ``init(validating:)`` rejects, since no reader would read that owner back.
/// - ``init(validating:)`` is for input from outside (configuration, network, user entry). It does not
///   repair anything: surrounding white space, control or other invisible format characters, and names
///   longer than ``maximumUTF8Length`` bytes are each a distinct ``IdentityValidationError``.
public struct Identity: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The most UTF-8 bytes ``init(validating:)`` accepts (a user principal name is at most 1,024
    /// characters in directory services; bytes are the stricter, cheaper bound).
    public static let maximumUTF8Length = 1024

    /// "No user / unknown personal account": the empty name. Gets the unrestricted policy.
    public static let unmanaged = Identity(storage: Storage(name: ""))

    @usableFromInline
    let storage: Storage

    private init(storage: Storage) {
        self.storage = storage
    }

    /// Makes an identity from any string; never fails.
    ///
    /// Surrounding white space and newlines are trimmed; a string that is empty after trimming gives
    /// ``unmanaged``. Use ``init(validating:)`` for untrusted input.
    public init(_ name: some StringProtocol) {
        let trimmed = Identity.trimmingSurroundingWhitespace(String(name))
        self = trimmed.isEmpty ? .unmanaged : Identity(storage: Storage(name: trimmed))
    }

    /// Makes an identity from untrusted input, rejecting what ``init(_:)`` would silently accept.
    ///
    /// The empty string is valid and gives ``unmanaged``.
    /// - Throws: ``IdentityValidationError`` naming the first problem found, checked in this order:
    ///   length, surrounding white space, control or format characters.
    public init(validating name: some StringProtocol) throws(IdentityValidationError) {
        let name = String(name)
        if let problem = Identity.problem(in: name) { throw problem }
        self = name.isEmpty ? .unmanaged : Identity(storage: Storage(name: name))
    }

    /// What ``init(validating:)`` would reject in `name`, or `nil`; makes no identity. For the stores of the
    /// protection module, which record only names they can read back through ``init(validating:)``.
    package static func problem(in name: String) -> IdentityValidationError? {
        var name = name
        // Scanned as the contiguous UTF-8 of a native string (iterating the UTF-8 view cost about 50
        // instructions a byte).
        let (length, isPrintableASCII, spaceAtAnEnd) = name.withUTF8 { bytes in
            (bytes.count, !bytes.contains { $0 < 0x20 || $0 > 0x7E }, bytes.first == 0x20 || bytes.last == 0x20)
        }
        if length > Identity.maximumUTF8Length {
            return .tooLong(utf8Length: length, limit: Identity.maximumUTF8Length)
        }
        // Printable ASCII (the usual account name) has no forbidden character, and its only white space is
        // the space: the Unicode property lookups below are needed only for anything else.
        if isPrintableASCII { return spaceAtAnEnd ? .surroundingWhitespace : nil }
        if Identity.trimmingSurroundingWhitespace(name) != name {
            return .surroundingWhitespace
        }
        for (offset, scalar) in name.unicodeScalars.enumerated() where Identity.isForbidden(scalar) {
            return .forbiddenCharacter(scalar: scalar.value, offset: offset)
        }
        return nil
    }

    /// The name as it was given (after trimming, for ``init(_:)``).
    public var name: String { storage.name }

    /// Whether this is the unmanaged identity (the empty name).
    public var isUnmanaged: Bool { storage.key.isEmpty }

    /// The case-folded comparison key.
    public var foldedName: String { storage.key }

    public var description: String { storage.name }

    public var debugDescription: String { "Identity(\(String(reflecting: storage.name)))" }

    /// Equal when the case-folded keys are equal. Keys whose cached hashes differ cannot be equal, so a
    /// dictionary probe that meets another account's entry is told apart without comparing strings.
    @inlinable
    public static func == (lhs: Identity, rhs: Identity) -> Bool {
        lhs.storage === rhs.storage
            || (lhs.storage.keyHash == rhs.storage.keyHash && lhs.storage.key == rhs.storage.key)
    }

    /// Feeds the key's hash, computed once when the identity was made, so a dictionary lookup of an identity
    /// does not hash its name again. Equal identities have equal keys, hence equal hashes.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.keyHash)
    }

    /// Immutable, shared storage: copying an `Identity` costs one retain.
    @usableFromInline
    final class Storage: Sendable {
        let name: String
        @usableFromInline
        let key: String
        /// `key.hashValue` (seeded per process, like every `Hasher`).
        @usableFromInline
        let keyHash: Int

        init(name: String) {
            self.name = name
            let key = Identity.fold(name)
            self.key = key
            keyHash = key.hashValue
        }
    }

    /// Full, locale-independent Unicode case folding, from the standard library's Unicode tables (no
    /// Foundation, no locale, bounded stack for any length).
    ///
    /// Scalars that change when case-folded or lower-cased map through lower → upper → lower, which applies
    /// the one-to-many mappings (`ß` → `ss`, `ẞ` → `ss`, `ﬁ` → `fi`, `İ` → `i̇`) and brings every case
    /// variant (including Cherokee, whose folding targets upper case) to one form. Other scalars are kept,
    /// so the dotless `ı`, which does not change under folding, stays distinct from `i`.
    static func fold(_ name: String) -> String {
        if name.utf8.allSatisfy({ $0 < 0x80 }) {
            return name.lowercased()
        }
        var folded = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            if scalar.isASCII {
                // ASCII folds to ASCII lower case, without the Unicode tables.
                let value = scalar.value
                folded.append(value >= 0x41 && value <= 0x5A ? Unicode.Scalar(UInt8(value + 0x20)) : scalar)
                continue
            }
            let properties = scalar.properties
            guard properties.changesWhenCaseFolded || properties.changesWhenLowercased else {
                folded.append(scalar)
                continue
            }
            for lower in properties.lowercaseMapping.unicodeScalars {
                for upper in lower.properties.uppercaseMapping.unicodeScalars {
                    folded.append(contentsOf: upper.properties.lowercaseMapping.unicodeScalars)
                }
            }
        }
        return String(folded)
    }

    static func trimmingSurroundingWhitespace(_ name: String) -> String {
        // Starting and ending with printable ASCII other than the space (the usual name): nothing to trim, and no
        // Unicode property lookup.
        if let first = name.utf8.first, let last = name.utf8.last, (0x21...0x7E).contains(first), (0x21...0x7E).contains(last) {
            return name
        }
        let scalars = name.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        if first == scalars.startIndex && scalars.index(after: last) == scalars.endIndex { return name }
        return String(scalars[first...last])
    }

    static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned, .privateUse:
            return true
        default:
            return false
        }
    }
}

extension Identity: ExpressibleByStringLiteral {
    /// A literal goes through ``init(_:)``.
    public init(stringLiteral value: String) {
        self.init(value)
    }
}

extension Identity: Codable {
    /// Decodes from a single string through ``init(validating:)``: a stored identity that is not valid is
    /// a `DecodingError.dataCorrupted` naming the problem, not a silently repaired value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let name = try container.decode(String.self)
        do {
            self = try Identity(validating: name)
        } catch {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "Invalid identity: \(error)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}
