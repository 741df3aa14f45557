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
        switch asciiScheme(of: value) {
        case .bearer?:
            return value[value.utf8.index(value.utf8.startIndex, offsetBy: 7)...]
        case .other?:
            return nil
        case .undecided?, nil:
            let scheme = value.prefix(7)
            guard scheme.count == 7, scheme.lowercased() == "bearer " else { return nil }
            return value.dropFirst(7)
        }
    }

    private enum SchemeMatch {
        case bearer, other, undecided
    }

    /// The scheme decided on the first bytes, in the usual case: seven ASCII bytes followed by an ASCII byte (or
    /// nothing). Seven such bytes are seven characters (an ASCII byte joins the one before it only in CR LF, and
    /// the seventh must be a space), so the scheme is compared on the bytes: no grapheme breaking and no
    /// lower-cased copy at every request. `undecided` (a non-ASCII byte among the first eight) and `nil` (no
    /// contiguous UTF-8) leave it to the comparison of characters.
    private static func asciiScheme(of value: String) -> SchemeMatch? {
        value.utf8.withContiguousStorageIfAvailable { bytes -> SchemeMatch in
            guard bytes.count >= 7, let b = bytes.baseAddress else { return .other }
            guard bytes.count == 7 || b[7] < 0x80 else { return .undecided }
            // `byte | 0x20` equals a lower-case ASCII letter exactly for that letter and its upper case.
            let difference = ((b[0] | 0x20) ^ 0x62) | ((b[1] | 0x20) ^ 0x65) | ((b[2] | 0x20) ^ 0x61)
                | ((b[3] | 0x20) ^ 0x72) | ((b[4] | 0x20) ^ 0x65) | ((b[5] | 0x20) ^ 0x72) | (b[6] ^ 0x20)
            if difference == 0 { return .bearer }
            return (b[0] | b[1] | b[2] | b[3] | b[4] | b[5] | b[6]) < 0x80 ? .other : .undecided
        }
    }
}
