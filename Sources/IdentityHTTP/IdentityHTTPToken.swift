import IdentityAssertions

/// The identity assertion a request carries, found by the rules both middlewares (IdentityHummingbird,
/// IdentityVapor) follow, independent of any web framework:
///
/// 1. The dedicated assertion header (`x-identity-assertion` unless configured otherwise) if present. Sent more
///    than once: 401 `malformed-token` (`AssertionError.malformed(_:)` naming the count and the header), never
///    resolved by picking one.
/// 2. Else, when bearer tokens are accepted, `Authorization: Bearer <token>` (RFC 6750 §2.1: the scheme
///    case-insensitive, one space, then the token). Several `Authorization` lines are read as one, joined with
///    `", "`, as `HTTPFields` reads them.
/// 3. Else 401 `missing-token`.
///
/// The token is only found here, not verified: `IdentityAssertionVerifier.verify(_:)` does that.
public struct IdentityHTTPToken: Sendable, Hashable {
    /// Where a token was found.
    public enum Source: String, Sendable, Hashable {
        /// The dedicated assertion header.
        case assertionHeader
        /// `Authorization: Bearer <token>`.
        case bearerToken
    }

    /// The compact JWS, as sent.
    public var token: String { String(text) }
    /// The token where it was found: the verifier reads it there, without a copy of its bytes.
    package let text: Substring
    /// Which header carried it.
    public let source: Source

    /// The token of a request, or the problem that refuses it.
    ///
    /// - Parameters:
    ///   - assertionHeader: the dedicated header's name, as the refusal of a repeated header names it.
    ///   - values: every value the request sent for that header, one per field line.
    ///   - authorization: the request's `Authorization` value (several lines joined with `", "`), or `nil`.
    ///   - acceptsBearerToken: whether `Authorization: Bearer` is looked at.
    ///   - problemTypeBase: the ``IdentityHTTPProblem/typeBase`` of the refusals.
    /// - Throws: 401 `malformed-token` for a repeated assertion header, 401 `missing-token` for no token.
    public init(
        assertionHeader: String, values: [String], authorization: String?, acceptsBearerToken: Bool,
        problemTypeBase: String = IdentityHTTPProblem.defaultTypeBase
    ) throws(IdentityHTTPProblem) {
        if values.count > 1 {
            throw .token(.malformed("\(values.count) \(assertionHeader) headers"), typeBase: problemTypeBase)
        }
        if let token = values.first {
            self.init(token: token, source: .assertionHeader)
        } else if acceptsBearerToken, let authorization, let token = Self.bearerTokenText(inAuthorization: authorization) {
            self.init(text: token, source: .bearerToken)
        } else {
            throw .missingToken(typeBase: problemTypeBase)
        }
    }

    /// A token and where it was found.
    public init(token: String, source: Source) {
        self.init(text: token[...], source: source)
    }

    private init(text: Substring, source: Source) {
        self.text = text
        self.source = source
    }

    /// The token of an `Authorization` value of the `Bearer` scheme (RFC 6750 §2.1: the scheme is
    /// case-insensitive, one space, then the token), else `nil`.
    public static func bearerToken(inAuthorization value: String) -> String? {
        bearerTokenText(inAuthorization: value).map(String.init)
    }

    /// ``bearerToken(inAuthorization:)`` as a slice of `value`.
    private static func bearerTokenText(inAuthorization value: String) -> Substring? {
        // The usual value: the scheme in ASCII followed by an ASCII byte (or nothing). Seven bytes are then seven
        // characters (an ASCII byte joins the one before it only in CR LF), so the scheme is compared and cut on
        // the UTF-8 view: no grapheme breaking, no lower-cased copy, for every request.
        let utf8 = value.utf8
        if utf8.count >= 7, utf8.count == 7 || utf8[utf8.index(utf8.startIndex, offsetBy: 7)] < 0x80 {
            var index = utf8.startIndex
            var matches = true
            for expected in "bearer ".utf8 {
                let byte = utf8[index]
                if byte | (byte >= 0x41 && byte <= 0x5A ? 0x20 : 0) != expected {
                    matches = false
                    break
                }
                utf8.formIndex(after: &index)
            }
            if matches { return value[index...] }
            if utf8.prefix(7).allSatisfy({ $0 < 0x80 }) { return nil }
        }
        let scheme = value.prefix(7)
        guard scheme.count == 7, scheme.lowercased() == "bearer " else { return nil }
        return value.dropFirst(7)
    }
}
