import Foundation
import GRPCCore
import IdentityHTTP

/// A refusal by ``IdentityServerInterceptor``, answered as a gRPC status: an `RPCErrorConvertible` over the
/// framework-neutral `IdentityHTTPProblem` (product `IdentityHTTP` of the root package), which holds the
/// vocabulary (codes, titles, details, members) that the HTTP middlewares answer too.
///
/// This type is the one place where a problem becomes a gRPC status:
///
/// | problem status | gRPC status code | problems |
/// |---|---|---|
/// | 401 | `unauthenticated` (16) | `missing-token` and every refused token (`bad-signature`, `expired-token`, `replayed-token`, `tenant-mismatch`, …) |
/// | 403 | `permissionDenied` (7) | a refused account: `account-blocked`, `account-not-allowed`, `account-claimed`, `admission-denied` |
/// | 503 | `unavailable` (14) | an undecided policy: `policy-unavailable`, `admission-unavailable`, `replay-cache-full` |
/// | 500 | `internalError` (13) | `verification-failed` when the platform crypto failed |
/// | 400, 404, 429 | `invalidArgument`, `notFound`, `resourceExhausted` | problems of a service's own |
/// | any other | `unknown` (2) | |
///
/// The status message is `"<code>: <detail>"` (`"bad-signature: AssertionError 5: the signature does not
/// verify"`). The trailing metadata carries the same refusal for programs:
///
/// - ``codeMetadataKey`` (`identity-problem-code`): the problem's stable code, `bad-signature`;
/// - ``statusMetadataKey`` (`identity-problem-status`): its HTTP status, `401`;
/// - ``documentMetadataKey`` (`identity-problem-bin`): the whole RFC 9457 document, the bytes an HTTP
///   middleware would send as the body (binary metadata);
/// - the problem's headers in lower case: `www-authenticate` on a 401, `retry-after` on a 503.
///
/// A client reads a refusal back from the `RPCError` it caught, `IdentityProblem(error)`:
///
/// ```swift
/// do { try await client.unary(...) } catch let error as RPCError {
///     if let refusal = IdentityProblem(error), refusal.code == "policy-unavailable" { /* retry later */ }
/// }
/// ```
///
/// Its members are the neutral problem's (``problem``), read through it: `status`, `code`, `title`,
/// `detail`, `type`, `assertionError`, `admissionResult`, `account`, `json`.
public struct IdentityProblem: Error, IdentityHTTPProblemAdapter, RPCErrorConvertible, Sendable, Hashable {
    /// The metadata key of the problem's code (`bad-signature`).
    public static let codeMetadataKey = "identity-problem-code"
    /// The metadata key of the problem's HTTP status (`401`).
    public static let statusMetadataKey = "identity-problem-status"
    /// The binary metadata key of the problem document (JSON, as an HTTP middleware would send it).
    public static let documentMetadataKey = "identity-problem-bin"

    /// The framework-neutral problem: its code, title, detail, members, headers and document.
    public let problem: IdentityHTTPProblem

    /// The problem, answered through gRPC.
    public init(_ problem: IdentityHTTPProblem) {
        self.problem = problem
    }

    /// The refusal a server sent, read back from an `RPCError`'s metadata (``documentMetadataKey``); `nil`
    /// when the error carries no identity problem (the service's own errors, transport errors).
    public init?(_ error: RPCError) {
        guard let bytes = error.metadata[binaryValues: Self.documentMetadataKey].first(where: { _ in true }),
              let document = try? JSONDecoder().decode(IdentityHTTPProblem.Document.self, from: Data(bytes)),
              document.type.hasSuffix(document.code)
        else { return nil }
        // Whether a token was sent only shapes WWW-Authenticate on a 401: "Bearer" alone says none was.
        let challenge = error.metadata[stringValues: "www-authenticate"].first(where: { _ in true })
        self.init(IdentityHTTPProblem(
            status: document.status, code: document.code, title: document.title, detail: document.detail,
            assertionError: document.assertionError, admissionResult: document.admissionResult,
            account: document.account, tokenWasSent: challenge != "Bearer",
            typeBase: String(document.type.dropLast(document.code.utf8.count))))
    }

    /// The gRPC status code of the problem's HTTP status (the table above).
    public var rpcErrorCode: RPCError.Code {
        switch problem.status {
        case 401: .unauthenticated
        case 403: .permissionDenied
        case 503: .unavailable
        case 500: .internalError
        case 400: .invalidArgument
        case 404: .notFound
        case 429: .resourceExhausted
        default: .unknown
        }
    }

    /// `"<code>: <detail>"`.
    public var rpcErrorMessage: String { "\(problem.code): \(problem.detail)" }

    /// The code, the status, the document and the problem's headers (above).
    public var rpcErrorMetadata: Metadata {
        var metadata: Metadata = [:]
        metadata.addString(problem.code, forKey: Self.codeMetadataKey)
        metadata.addString(String(problem.status), forKey: Self.statusMetadataKey)
        metadata.addBinary(problem.json, forKey: Self.documentMetadataKey)
        for header in problem.headers {
            metadata.addString(header.value, forKey: header.name.lowercased())
        }
        return metadata
    }

    /// The `RPCError` a server answers: ``rpcErrorCode``, ``rpcErrorMessage``, ``rpcErrorMetadata``.
    public var rpcError: RPCError { RPCError(self) }
}
