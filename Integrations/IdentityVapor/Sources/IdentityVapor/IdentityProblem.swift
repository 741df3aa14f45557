import Foundation
import IdentityHTTP
import Vapor

/// A refusal by ``IdentityMiddleware``, answered as an RFC 9457 problem document
/// (`Content-Type: application/problem+json`): an `AbortError` over the framework-neutral
/// `IdentityHTTPProblem` (product `IdentityHTTP` of the root package), which holds the vocabulary (statuses,
/// codes, titles, members, headers, the JSON bytes) and documents it. IdentityHummingbird answers the same
/// documents byte for byte (`Integrations/identity-problems.json` pins them).
///
/// Its members are the neutral problem's (``problem``), read through it: `code`, `title`, `detail`, `type`,
/// `assertionError`, `admissionResult`, `account`, `json`; ``status`` and ``headers`` are Vapor's types.
///
/// `policy-unavailable` (503) is the one code IdentityHummingbird does not answer: its middleware admits the
/// request and the handler's first operation on owned data fails with `ProtectionError.policyUnavailable`
/// (115); this middleware refuses at the door instead (deny by default).
///
/// The middleware returns ``response()`` itself rather than throwing, because Vapor's `ErrorMiddleware`
/// would replace the body with its own `{"error":true,"reason":…}`. Thrown anyway (from code that calls
/// ``IdentityMiddleware/verify(_:)``), it is an `AbortError` with the same status, headers and `detail`.
public struct IdentityProblem: AbortError, IdentityHTTPProblemAdapter, Sendable, Hashable {
    /// The framework-neutral problem: its code, title, detail, members, headers and document.
    public let problem: IdentityHTTPProblem

    /// The problem, answered through Vapor.
    public init(_ problem: IdentityHTTPProblem) {
        self.problem = problem
    }

    /// The HTTP status.
    public var status: HTTPResponseStatus { HTTPResponseStatus(statusCode: problem.status) }

    /// `AbortError`: the problem's `detail`.
    public var reason: String { problem.detail }

    /// `AbortError`: `WWW-Authenticate` on a 401, `Retry-After` on a 503 (without the content type, which
    /// whoever renders the error sets).
    public var headers: HTTPHeaders {
        HTTPHeaders(problem.headers.map { ($0.name, $0.value) })
    }

    /// The refusal as a response: ``status``, `Content-Type: application/problem+json`, ``headers`` and the
    /// problem's JSON document as the body.
    public func response() -> Response {
        var headers = headers
        headers.replaceOrAdd(name: .contentType, value: IdentityHTTPProblem.contentType)
        return Response(status: status, headers: headers, body: .init(data: Data(problem.json)))
    }
}
