import Foundation
import HTTPTypes
import Hummingbird
import IdentityPolicy
import IdentityAssertions

/// A refusal by ``IdentityMiddleware``, answered as an RFC 9457 problem document
/// (`Content-Type: application/problem+json`):
///
/// ```json
/// {"type":"https://identity-runtime.invalid/problems/bad-signature","title":"Invalid identity token",
///  "status":401,"detail":"AssertionError 5: the signature does not verify","code":"bad-signature",
///  "assertionError":5}
/// ```
///
/// `type` is ``IdentityMiddleware/problemTypeBase`` followed by ``code``; `code` is stable and meant for
/// programs; `detail` is for people and may change. Extension members: `assertionError` (the
/// ``AssertionError/code``) for token refusals, `admissionResult` (the ``SwitchIdentityResult`` raw value) and
/// `account` for admission refusals. A 401 also carries `WWW-Authenticate: Bearer` (RFC 6750), with
/// `error="invalid_token"` when a token was sent.
///
/// | status | code | when |
/// |---|---|---|
/// | 401 | `missing-token` | no assertion header and no `Authorization: Bearer` |
/// | 401 | `malformed-token` | ``AssertionError/malformed(_:)``, or the header was sent more than once |
/// | 401 | `unsupported-algorithm` | ``AssertionError/unsupportedAlgorithm(_:)`` |
/// | 401 | `unsupported-header` | ``AssertionError/unsupportedHeader(_:)`` |
/// | 401 | `unknown-key` | ``AssertionError/unknownKey(_:)`` |
/// | 401 | `bad-signature` | ``AssertionError/badSignature``: forged or tampered |
/// | 401 | `expired-token` | ``AssertionError/expired(at:)`` |
/// | 401 | `token-not-yet-valid` | ``AssertionError/notYetValid(until:)`` |
/// | 401 | `wrong-audience` | ``AssertionError/wrongAudience(_:)`` |
/// | 401 | `wrong-issuer` | ``AssertionError/wrongIssuer(_:)`` |
/// | 401 | `replayed-token` | ``AssertionError/replayed(tokenID:)`` |
/// | 401 | `invalid-account` | ``AssertionError/invalidAccount(_:)`` |
/// | 401 | `tenant-mismatch` | the token's `tid` is not the tenant the runtime knows for the account |
/// | 503 | `replay-cache-full` | ``AssertionError/replayCacheFull``: the service is over capacity, not the caller wrong |
/// | 500 | `verification-failed` | ``AssertionError/cryptoBackendFailure(_:)``: the platform crypto failed (401 for the other errors the verifier does not answer about tokens) |
/// | 403 | `account-blocked` | admission refused: ``AdmissionError/Cause/blocked(_:)`` |
/// | 403 | `account-not-allowed` | admission refused: ``AdmissionError/Cause/notInAllowedAccounts`` |
/// | 403 | `account-claimed` | admission refused: ``AdmissionError/Cause/claimed`` |
/// | 403 | `admission-denied` | an ``AdmissionCheck`` denied the account (it is now blocked) |
/// | 503 | `admission-unavailable` | no ``AdmissionCheck`` could decide now; retry later |
public struct IdentityProblem: HTTPResponseError, Sendable, Hashable, CustomStringConvertible {
    /// The stable, machine-readable code (the last part of `type`).
    public let code: String
    /// A short summary of the problem type.
    public let title: String
    /// The HTTP status.
    public let status: HTTPResponse.Status
    /// What happened, for people.
    public let detail: String
    /// ``AssertionError/code`` for a refused token.
    public let assertionError: Int?
    /// ``AdmissionError/code`` (the ``SwitchIdentityResult`` raw value) for a refused admission.
    public let admissionResult: Int?
    /// The account refused at admission.
    public let account: String?
    /// Whether a token was sent (shapes `WWW-Authenticate` on a 401).
    let tokenWasSent: Bool
    /// The base of `type`.
    let typeBase: String

    /// The problem's `type` URI.
    public var type: String { typeBase + code }

    public var description: String { "\(status.code) \(code): \(detail)" }

    init(
        code: String, title: String, status: HTTPResponse.Status, detail: String, assertionError: Int? = nil,
        admissionResult: Int? = nil, account: String? = nil, tokenWasSent: Bool, typeBase: String
    ) {
        self.code = code
        self.title = title
        self.status = status
        self.detail = detail
        self.assertionError = assertionError
        self.admissionResult = admissionResult
        self.account = account
        self.tokenWasSent = tokenWasSent
        self.typeBase = typeBase
    }

    /// No token at all.
    static func missingToken(typeBase: String) -> IdentityProblem {
        IdentityProblem(
            code: "missing-token", title: "Identity token required", status: .unauthorized,
            detail: "send a signed identity assertion in the assertion header or as Authorization: Bearer",
            tokenWasSent: false, typeBase: typeBase)
    }

    /// A refused token.
    static func token(_ error: AssertionError, typeBase: String) -> IdentityProblem {
        let code = switch error {
        case .malformed: "malformed-token"
        case .unsupportedAlgorithm: "unsupported-algorithm"
        case .unsupportedHeader: "unsupported-header"
        case .unknownKey: "unknown-key"
        case .badSignature: "bad-signature"
        case .expired: "expired-token"
        case .notYetValid: "token-not-yet-valid"
        case .wrongAudience: "wrong-audience"
        case .wrongIssuer: "wrong-issuer"
        case .replayed: "replayed-token"
        case .replayCacheFull: "replay-cache-full"
        case .invalidAccount: "invalid-account"
        case .lifetimeTooLong: "token-lifetime-too-long"
        case .invalidTenant: "invalid-tenant"
        // Not answers of `verify` about a token (keys, signing, key sets); a verifier that reported one failed.
        case .invalidKey, .cryptoBackendFailure, .unsignable, .invalidKeySet: "verification-failed"
        }
        if case .cryptoBackendFailure = error {
            return IdentityProblem(
                code: code, title: "Identity verification failed", status: .internalServerError,
                detail: error.description, assertionError: error.code, tokenWasSent: true, typeBase: typeBase)
        }
        if case .replayCacheFull = error {
            return IdentityProblem(
                code: code, title: "Identity service over capacity", status: .serviceUnavailable,
                detail: error.description, assertionError: error.code, tokenWasSent: true, typeBase: typeBase)
        }
        return IdentityProblem(
            code: code, title: "Invalid identity token", status: .unauthorized, detail: error.description,
            assertionError: error.code, tokenWasSent: true, typeBase: typeBase)
    }

    /// A token whose `tid` contradicts the runtime's tenant of the account.
    static func tenantMismatch(claimed: String, known: String, typeBase: String) -> IdentityProblem {
        IdentityProblem(
            code: "tenant-mismatch", title: "Invalid identity token", status: .unauthorized,
            detail: "the token names tenant \(String(reflecting: claimed)), the account belongs to \(String(reflecting: known))",
            tokenWasSent: true, typeBase: typeBase)
    }

    /// A refused admission.
    static func admission(_ error: AdmissionError, typeBase: String) -> IdentityProblem {
        let (code, status): (String, HTTPResponse.Status) = switch error.cause {
        case .blocked: ("account-blocked", .forbidden)
        case .notInAllowedAccounts: ("account-not-allowed", .forbidden)
        case .claimed: ("account-claimed", .forbidden)
        case .denied: ("admission-denied", .forbidden)
        case .unavailable: ("admission-unavailable", .serviceUnavailable)
        }
        return IdentityProblem(
            code: code, title: status == .forbidden ? "Account not admitted" : "Admission undecided",
            status: status, detail: error.description, admissionResult: error.code, account: error.account.name,
            tokenWasSent: true, typeBase: typeBase)
    }

    private struct Body: Encodable {
        let type: String
        let title: String
        let status: Int
        let detail: String
        let code: String
        let assertionError: Int?
        let admissionResult: Int?
        let account: String?
    }

    /// The problem document as bytes (JSON, keys sorted).
    public var json: [UInt8] {
        let body = Body(
            type: type, title: title, status: status.code, detail: detail, code: code,
            assertionError: assertionError, admissionResult: admissionResult, account: account)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and integers only: encoding cannot fail.
        return (try? Array(encoder.encode(body))) ?? Array(#"{"status":\#(status.code)}"#.utf8)
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/problem+json"]
        if status == .unauthorized {
            headers[.wwwAuthenticate] = tokenWasSent ? #"Bearer error="invalid_token""# : "Bearer"
        }
        if status == .serviceUnavailable { headers[.retryAfter] = "1" }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
    }
}
