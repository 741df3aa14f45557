import Foundation
import IdentityPolicy
import Vapor

/// A refusal by ``IdentityMiddleware``, answered as an RFC 9457 problem document
/// (`Content-Type: application/problem+json`):
///
/// ```json
/// {"assertionError":5,"code":"bad-signature","detail":"AssertionError 5: the signature does not verify",
///  "status":401,"title":"Invalid identity token","type":"https://identity-runtime.invalid/problems/bad-signature"}
/// ```
///
/// The vocabulary is IdentityHummingbird's, byte for byte: the same statuses, `code`s, titles, members and
/// headers (`Integrations/identity-problems.json` holds the documents both packages' tests compare against).
/// `type` is ``IdentityMiddleware/problemTypeBase`` followed by ``code``; `code` is stable and meant for
/// programs; `detail` is for people and may change. Extension members: `assertionError` (the
/// `AssertionError` code) for token refusals, `admissionResult` (the `SwitchIdentityResult` raw value) and
/// `account` for admission refusals, `account` for `policy-unavailable`. A 401 also carries
/// `WWW-Authenticate: Bearer` (RFC 6750), with `error="invalid_token"` when a token was sent; a 503 carries
/// `Retry-After: 1`.
///
/// | status | code | when |
/// |---|---|---|
/// | 401 | `missing-token` | no assertion header and no `Authorization: Bearer` |
/// | 401 | `malformed-token` | `AssertionError.malformed`, or the assertion header was sent more than once |
/// | 401 | `unsupported-algorithm` | `AssertionError.unsupportedAlgorithm` |
/// | 401 | `unsupported-header` | `AssertionError.unsupportedHeader` |
/// | 401 | `unknown-key` | `AssertionError.unknownKey` |
/// | 401 | `bad-signature` | `AssertionError.badSignature`: forged or tampered |
/// | 401 | `expired-token` | `AssertionError.expired` |
/// | 401 | `token-not-yet-valid` | `AssertionError.notYetValid` |
/// | 401 | `wrong-audience` | `AssertionError.wrongAudience` |
/// | 401 | `wrong-issuer` | `AssertionError.wrongIssuer` |
/// | 401 | `replayed-token` | `AssertionError.replayed` |
/// | 401 | `invalid-account` | `AssertionError.invalidAccount` |
/// | 401 | `token-lifetime-too-long` | `AssertionError.lifetimeTooLong` |
/// | 401 | `invalid-tenant` | `AssertionError.invalidTenant` |
/// | 401 | `tenant-mismatch` | the token's `tid` is not the tenant the runtime knows for the account |
/// | 503 | `replay-cache-full` | `AssertionError.replayCacheFull`: the service is over capacity, not the caller wrong |
/// | 500 | `verification-failed` | `AssertionError.cryptoBackendFailure`: the platform crypto failed (401 for the other errors the verifier does not answer about tokens) |
/// | 503 | `policy-unavailable` | the `PolicyManager`'s policy source has not loaded yet (IdentityVapor only, see below) |
/// | 403 | `account-blocked` | admission refused: ``AdmissionError/Cause/blocked(_:)`` |
/// | 403 | `account-not-allowed` | admission refused: ``AdmissionError/Cause/notInAllowedAccounts`` |
/// | 403 | `account-claimed` | admission refused: ``AdmissionError/Cause/claimed`` |
/// | 403 | `admission-denied` | an ``AdmissionCheck`` denied the account (it is now blocked) |
/// | 503 | `admission-unavailable` | no ``AdmissionCheck`` could decide now, or the policy source has not loaded; retry later |
///
/// `policy-unavailable` is the one code IdentityHummingbird does not have: its middleware admits the request
/// and the handler's first operation on owned data fails with `ProtectionError.policyUnavailable` (115);
/// this middleware refuses at the door instead (deny by default).
///
/// The middleware returns ``response()`` itself rather than throwing, because Vapor's `ErrorMiddleware`
/// would replace the body with its own `{"error":true,"reason":…}`. Thrown anyway (from code that calls
/// ``IdentityMiddleware/verify(_:)``), it is an `AbortError` with the same status, headers and ``detail``.
public struct IdentityProblem: AbortError, Sendable, Hashable, CustomStringConvertible {
    /// The stable, machine-readable code (the last part of `type`).
    public let code: String
    /// A short summary of the problem type.
    public let title: String
    /// The HTTP status.
    public let status: HTTPResponseStatus
    /// What happened, for people.
    public let detail: String
    /// The `AssertionError` code for a refused token.
    public let assertionError: Int?
    /// ``AdmissionError/code`` (the ``SwitchIdentityResult`` raw value) for a refused admission.
    public let admissionResult: Int?
    /// The account refused at admission, or whose policy could not be decided.
    public let account: String?
    /// Whether a token was sent (shapes `WWW-Authenticate` on a 401).
    let tokenWasSent: Bool
    /// The base of `type`.
    let typeBase: String

    /// The problem's `type` URI.
    public var type: String { typeBase + code }

    public var description: String { "\(status.code) \(code): \(detail)" }

    /// `AbortError`: the ``detail``.
    public var reason: String { detail }

    /// `AbortError`: `WWW-Authenticate` on a 401, `Retry-After` on a 503 (without the content type, which
    /// whoever renders the error sets).
    public var headers: HTTPHeaders {
        var headers = HTTPHeaders()
        if status == .unauthorized {
            headers.add(name: .wwwAuthenticate, value: tokenWasSent ? #"Bearer error="invalid_token""# : "Bearer")
        }
        if status == .serviceUnavailable { headers.add(name: .retryAfter, value: "1") }
        return headers
    }

    init(
        code: String, title: String, status: HTTPResponseStatus, detail: String, assertionError: Int? = nil,
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

    /// A token whose `tid` contradicts the runtime's tenant of the account.
    static func tenantMismatch(claimed: String, known: String, typeBase: String) -> IdentityProblem {
        IdentityProblem(
            code: "tenant-mismatch", title: "Invalid identity token", status: .unauthorized,
            detail: "the token names tenant \(String(reflecting: claimed)), the account belongs to \(String(reflecting: known))",
            tokenWasSent: true, typeBase: typeBase)
    }

    /// A refused admission.
    static func admission(_ error: AdmissionError, typeBase: String) -> IdentityProblem {
        let (code, status): (String, HTTPResponseStatus) = switch error.cause {
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

    /// The members of the document, in the order of RFC 9457 and then the extensions (encoded sorted).
    struct Document: Codable {
        let type: String
        let title: String
        let status: Int
        let detail: String
        let code: String
        let assertionError: Int?
        let admissionResult: Int?
        let account: String?
    }

    /// The problem document as bytes (JSON, keys sorted, absent members left out).
    public var json: [UInt8] {
        let body = Document(
            type: type, title: title, status: Int(status.code), detail: detail, code: code,
            assertionError: assertionError, admissionResult: admissionResult, account: account)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and integers only: encoding cannot fail.
        return (try? Array(encoder.encode(body))) ?? Array(#"{"status":\#(status.code)}"#.utf8)
    }

    /// The refusal as a response: ``status``, `Content-Type: application/problem+json`, ``headers`` and
    /// ``json`` as the body.
    public func response() -> Response {
        var headers = headers
        headers.replaceOrAdd(name: .contentType, value: "application/problem+json")
        return Response(status: status, headers: headers, body: .init(data: Data(json)))
    }
}
