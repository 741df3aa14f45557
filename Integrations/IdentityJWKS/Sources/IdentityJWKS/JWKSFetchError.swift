import IdentityAssertions

/// Why a fetch of a JWKS document failed. A failed fetch never changes the keys in use: the last good set is
/// served until a fetch succeeds (see ``RemoteKeySet``), and the failure is kept in ``RemoteKeySet/lastError``.
public enum JWKSFetchError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The request could not be made or the connection failed (refused, reset, TLS, DNS); the underlying error's
    /// description.
    case transport(String)
    /// The endpoint answered with a status other than 200.
    case httpStatus(Int)
    /// The body is longer than ``AssertionKeySet/maximumJWKSLength`` bytes: announced by `Content-Length` or
    /// found while streaming; no more than the limit is ever buffered.
    case bodyTooLarge(maximum: Int)
    /// The body is not a key set ``AssertionKeySet`` accepts (`AssertionKeySet(jwks:)`), with its refusal.
    case invalidDocument(AssertionKeySet.Refusal)
    /// No complete answer within ``RemoteKeySet/Configuration/fetchTimeout``.
    case timeout
    /// Every fetch so far has failed, or none was made yet: there has never been a key set to verify with.
    /// Only ``RemoteKeySet/verify(_:)`` reports it (as ``JWKSVerificationError/keysUnavailable(_:)``'s cause
    /// when no fetch was attempted).
    case neverFetched
    /// The address, or one a redirect led to, is plain `http` to a host other than this machine's loopback, or
    /// plain `http` to loopback without ``RemoteKeySet/Configuration/allowsLoopbackHTTP``: a document that could
    /// have been changed in transit is never used. Thrown by ``RemoteKeySet/init(url:verifier:httpClient:configuration:)``
    /// for the configured address; a fetch redirected to such an address fails with it and changes no key.
    case insecureURL(String)
    /// The address is not an absolute `https` (or `http`) URL with a host.
    case invalidURL(String)

    public var description: String {
        switch self {
        case let .transport(reason): "JWKS fetch failed: \(reason)"
        case let .httpStatus(status): "JWKS fetch failed: HTTP status \(status)"
        case let .bodyTooLarge(maximum): "JWKS fetch failed: the body is longer than \(maximum) bytes"
        case let .invalidDocument(refusal): "JWKS fetch failed: the document was refused: \(refusal)"
        case .timeout: "JWKS fetch failed: timed out"
        case .neverFetched: "no JWKS has been fetched yet"
        case let .insecureURL(url): "JWKS address refused: \(url) is not https (plain http is allowed to a loopback host only, when configured)"
        case let .invalidURL(url): "JWKS address refused: \(url) is not an absolute http(s) URL with a host"
        }
    }
}

/// Why ``RemoteKeySet/verify(_:)`` refused a token.
public enum JWKSVerificationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The verifier refused the token (with the keys of the last good set, after a refresh when its `kid` was
    /// unknown and a refresh was allowed).
    case refused(AssertionError)
    /// No good key set was ever fetched, so no token can be verified: deny by default. Carries the last fetch
    /// failure.
    case keysUnavailable(JWKSFetchError)

    public var description: String {
        switch self {
        case let .refused(error): error.description
        case let .keysUnavailable(cause): "no key set to verify with: \(cause)"
        }
    }
}
