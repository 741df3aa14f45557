import HTTPTypes
import Hummingbird
import IdentityHTTP

/// A refusal by ``IdentityMiddleware``, answered as an RFC 9457 problem document
/// (`Content-Type: application/problem+json`): an `HTTPResponseError` over the framework-neutral
/// `IdentityHTTPProblem` (product `IdentityHTTP` of the root package), which holds the vocabulary (statuses,
/// codes, titles, members, headers, the JSON bytes) and documents it. IdentityVapor answers the same documents
/// byte for byte.
///
/// Its members are the neutral problem's (``problem``), read through it: `code`, `title`, `detail`, `type`,
/// `assertionError`, `admissionResult`, `account`, `json`; ``status`` is Hummingbird's type.
public struct IdentityProblem: HTTPResponseError, IdentityHTTPProblemAdapter, Sendable, Hashable {
    /// The framework-neutral problem: its code, title, detail, members, headers and document.
    public let problem: IdentityHTTPProblem

    /// The problem, answered through Hummingbird.
    public init(_ problem: IdentityHTTPProblem) {
        self.problem = problem
    }

    /// The HTTP status.
    public var status: HTTPResponse.Status {
        switch problem.status {
        case 401: .unauthorized
        case 403: .forbidden
        case 500: .internalServerError
        case 503: .serviceUnavailable
        case let code: HTTPResponse.Status(code: code)
        }
    }

    /// The response: ``status``, `Content-Type: application/problem+json`, the problem's headers
    /// (`WWW-Authenticate`, `Retry-After`) and its JSON document as the body.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: IdentityHTTPProblem.contentType]
        for header in problem.headers {
            if let name = HTTPField.Name(header.name) { headers[name] = header.value }
        }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: problem.json)))
    }
}
