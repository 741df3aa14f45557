import IdentityCrypto
import IdentityJSON

/// JWKS (RFC 7517 §5) both ways, for Ed25519 keys only (RFC 8037: `"kty": "OKP"`, `"crv": "Ed25519"`).
///
/// Published (``jwks``): every key as `{"alg":"EdDSA","crv":"Ed25519","kid":…,"kty":"OKP","use":"sig","x":…}`,
/// sorted by key ID, with `x` the 32-byte public key in base64url without padding; never a private member.
///
/// Read (`init(jwks:)`): strict, and all or nothing: the whole document is refused with
/// ``AssertionError/invalidKeySet(_:)`` and a ``Refusal`` at the first thing it cannot take at face value:
/// - the document: more than ``maximumJWKSLength`` bytes; not one JSON object in UTF-8 as the token reader
///   accepts it (a member name given twice in any object, invalid UTF-8, a lone surrogate, nesting deeper than 8,
///   a string longer than ``maximumMemberLength`` bytes, a number that is not an integer of 64 bits: no fraction,
///   no exponent, at most 20 characters); no `keys` member,
///   or `keys` not an array of objects; more than ``maximumKeyCount`` keys;
/// - a key: any private-key member of any key type (`d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`, `k`); `kty` other
///   than `OKP`; `crv` other than `Ed25519`; `alg`, when present, other than `EdDSA`; `use`, when present, other
///   than `sig`; `key_ops`, when present, other than `["verify"]`; a certificate or a reference to one (`x5u`,
///   `x5c`, `x5t`, `x5t#S256`: which key would be meant when they disagree with `x`?); no `kid`, an empty one or
///   one longer than 256 bytes; `x` missing, not canonical base64url without padding, not 32 bytes, not a
///   canonical point encoding (y ≥ 2^255 − 19) or one of the 8 points of small order (keys under which no
///   signature verifies: see ``AssertionVerificationKey/isValidSignature(_:of:)``); a member of the wrong JSON
///   type (`null` included);
/// - the set: two keys whose `kid`s are equal byte for byte. IDs that differ only by canonical equivalence
///   (`"café"` composed and decomposed) are two keys, as in the set itself: a token's `kid` names one of
///   them by its bytes, so what ``jwks`` publishes always reads back to an equal set.
///
/// Members of the document and of a key that RFC 7517 lets a reader ignore are checked for syntax, then
/// ignored. Names and values compare byte for byte (`"OKP"`, never `"okp"`).
extension AssertionKeySet {
    /// The largest JWKS document read, in bytes (64 KiB).
    public static let maximumJWKSLength = 65_536
    /// The most keys a JWKS document may hold.
    public static let maximumKeyCount = 64
    /// The longest string (member name or value, as written) in a JWKS document, in bytes.
    public static let maximumMemberLength = 1_024
    /// The longest key ID read, in bytes.
    public static let maximumKeyIDLength = 256

    /// Why a JWKS document was refused (``AssertionError/invalidKeySet(_:)``). `key` is the position of the key
    /// in the document's `keys` array, from 0.
    public enum Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// Longer than ``AssertionKeySet/maximumJWKSLength``.
        case documentTooLarge(bytes: Int, maximum: Int)
        /// Not a JSON object the strict reader accepts (the reason says what).
        case notJSON(String)
        /// No `keys` member, or not an array of objects.
        case notAKeySet(String)
        /// More than ``AssertionKeySet/maximumKeyCount`` keys.
        case tooManyKeys(count: Int, maximum: Int)
        /// A private-key member (`d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`, `k`): a key set publishes public keys only.
        case privateKeyMember(key: Int, member: String)
        /// `kty` is not `OKP`.
        case unsupportedKeyType(key: Int, String)
        /// `crv` is not `Ed25519`.
        case unsupportedCurve(key: Int, String)
        /// `alg` is present and not `EdDSA`.
        case unsupportedAlgorithm(key: Int, String)
        /// `use` is present and not `sig`, or `key_ops` is present and not `["verify"]`.
        case unsupportedUse(key: Int, String)
        /// A member this reader refuses to ignore: `x5u`, `x5c`, `x5t`, `x5t#S256`.
        case unsupportedMember(key: Int, member: String)
        /// No `kid`.
        case missingKeyID(key: Int)
        /// `kid` empty or longer than ``AssertionKeySet/maximumKeyIDLength`` bytes.
        case invalidKeyID(key: Int, String)
        /// Two keys with the same `kid`, byte for byte.
        case duplicateKeyID(String)
        /// `x` is missing, not canonical base64url without padding, not 32 bytes, not a canonical point encoding
        /// (y ≥ 2^255 − 19), or one of the 8 points of small order.
        case invalidPublicKey(key: Int, String)
        /// A member of the wrong JSON type (`null` included).
        case malformedKey(key: Int, String)

        public var description: String {
            switch self {
            case let .documentTooLarge(bytes, maximum): "the document is \(bytes) bytes, more than \(maximum)"
            case let .notJSON(reason): "not a JSON object: \(reason)"
            case let .notAKeySet(reason): "not a key set: \(reason)"
            case let .tooManyKeys(count, maximum): "\(count) keys, more than \(maximum)"
            case let .privateKeyMember(key, member): "key \(key) has the private member \(String(reflecting: member))"
            case let .unsupportedKeyType(key, type): "key \(key): kty \(String(reflecting: type)) is not OKP"
            case let .unsupportedCurve(key, curve): "key \(key): crv \(String(reflecting: curve)) is not Ed25519"
            case let .unsupportedAlgorithm(key, algorithm): "key \(key): alg \(String(reflecting: algorithm)) is not EdDSA"
            case let .unsupportedUse(key, use): "key \(key): \(use) is not for verifying signatures"
            case let .unsupportedMember(key, member): "key \(key): member \(String(reflecting: member)) is not accepted"
            case let .missingKeyID(key): "key \(key) has no kid"
            case let .invalidKeyID(key, reason): "key \(key): kid \(reason)"
            case let .duplicateKeyID(id): "kid \(String(reflecting: id)) is given twice"
            case let .invalidPublicKey(key, reason): "key \(key): x \(reason)"
            case let .malformedKey(key, reason): "key \(key): \(reason)"
            }
        }
    }

    /// The public keys as a JWKS document (RFC 7517), sorted by key ID: what a service publishes for the
    /// verifiers of its tokens. Read back by `init(jwks:)` to an equal set.
    public var jwks: String {
        var out = Array(#"{"keys":["#.utf8)
        for (index, id) in storage.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }).enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += StrictJSON.objectBytes([
                ("alg", .string("EdDSA")), ("crv", .string("Ed25519")), ("kid", .string(String(decoding: id, as: UTF8.self))),
                ("kty", .string("OKP")), ("use", .string("sig")), ("x", .string(Base64URL.encode(storage[id]!.rawRepresentation))),
            ])
        }
        out += Array("]}".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    /// The key set a JWKS document (JSON text) publishes.
    /// - Throws: ``AssertionError/invalidKeySet(_:)`` for a document refused as a whole (see the rules above).
    public init(jwks text: String) throws(AssertionError) {
        try self.init(jwks: Array(text.utf8))
    }

    /// The key set a JWKS document (its UTF-8 bytes, as fetched) publishes.
    /// - Throws: ``AssertionError/invalidKeySet(_:)`` for a document refused as a whole (see the rules above).
    public init(jwks bytes: some Collection<UInt8>) throws(AssertionError) {
        do throws(Refusal) {
            self.init(storage: try Self.read(bytes))
        } catch {
            throw .invalidKeySet(error)
        }
    }

    private static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]
    private static let certificateMembers = ["x5u", "x5c", "x5t", "x5t#S256"]

    private static func read(_ bytes: some Collection<UInt8>) throws(Refusal) -> [[UInt8]: AssertionVerificationKey] {
        guard bytes.count <= maximumJWKSLength else { throw .documentTooLarge(bytes: bytes.count, maximum: maximumJWKSLength) }
        let limits = StrictJSON.Limits(
            maximumDepth: 8, maximumStringLength: maximumMemberLength, maximumNumberLength: 20, integersOnly: true,
            keepsObjects: true)
        let document: [String: StrictJSON.Value]
        switch StrictJSON.object(Array(bytes), limits: limits) {
        case let .success(members): document = members
        case let .failure(failure): throw .notJSON(failure.description)
        }
        let keys: [[String: StrictJSON.Value]]
        switch document["keys"] {
        case let .objects(objects): keys = objects
        case .strings([]): keys = []
        case nil: throw .notAKeySet("no keys member")
        default: throw .notAKeySet("keys is not an array of objects")
        }
        guard keys.count <= maximumKeyCount else { throw .tooManyKeys(count: keys.count, maximum: maximumKeyCount) }

        var result: [[UInt8]: AssertionVerificationKey] = [:]
        for (index, members) in keys.enumerated() {
            if let member = privateMembers.first(where: { members[$0] != nil }) { throw .privateKeyMember(key: index, member: member) }
            func string(_ name: String) throws(Refusal) -> String? {
                switch members[name] {
                case nil: return nil
                case let .string(value): return value
                default: throw .malformedKey(key: index, "\(name) is not a string")
                }
            }
            let type = try string("kty")
            guard let type, type.utf8.elementsEqual("OKP".utf8) else { throw .unsupportedKeyType(key: index, type ?? "(missing)") }
            let curve = try string("crv")
            guard let curve, curve.utf8.elementsEqual("Ed25519".utf8) else { throw .unsupportedCurve(key: index, curve ?? "(missing)") }
            if let algorithm = try string("alg"), !algorithm.utf8.elementsEqual("EdDSA".utf8) {
                throw .unsupportedAlgorithm(key: index, algorithm)
            }
            if let use = try string("use"), !use.utf8.elementsEqual("sig".utf8) { throw .unsupportedUse(key: index, "use \(String(reflecting: use))") }
            switch members["key_ops"] {
            case nil: break
            case let .strings(operations) where operations.count == 1 && operations[0].utf8.elementsEqual("verify".utf8): break
            case let .strings(operations): throw .unsupportedUse(key: index, "key_ops \(operations)")
            default: throw .malformedKey(key: index, "key_ops is not an array of strings")
            }
            if let member = certificateMembers.first(where: { members[$0] != nil }) { throw .unsupportedMember(key: index, member: member) }
            guard let id = try string("kid") else { throw .missingKeyID(key: index) }
            guard !id.isEmpty, id.utf8.count <= maximumKeyIDLength else {
                throw .invalidKeyID(key: index, id.isEmpty ? "is empty" : "is longer than \(maximumKeyIDLength) bytes")
            }
            guard let encoded = try string("x") else { throw .invalidPublicKey(key: index, "is missing") }
            guard let raw = Base64URL.decode(Array(encoded.utf8)[...]) else {
                throw .invalidPublicKey(key: index, "is not canonical base64url without padding")
            }
            guard raw.count == Ed25519.keyLength else { throw .invalidPublicKey(key: index, "is \(raw.count) bytes, not 32") }
            if let defect = Ed25519.publicKeyDefect(raw) { throw .invalidPublicKey(key: index, defect.description) }
            let key: AssertionVerificationKey
            do { key = try AssertionVerificationKey(rawRepresentation: raw) } catch {
                throw .invalidPublicKey(key: index, "\(error)")
            }
            // Byte for byte, like every lookup: Swift's String equality would merge canonically equivalent IDs
            // that the set keeps apart and a token's kid tells apart.
            guard result.updateValue(key, forKey: Array(id.utf8)) == nil else { throw .duplicateKeyID(id) }
        }
        return result
    }
}
