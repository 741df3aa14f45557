import Foundation
import IdentityAssertions
import IdentityPolicy
import IdentityProtection
import IdentityRuntime

/// A refusal at a service's HTTP edge, as an RFC 9457 problem document (`Content-Type: application/problem+json`),
/// independent of any web framework: the status as an `Int`, the headers as name/value pairs, the body as bytes.
///
/// IdentityHummingbird's and IdentityVapor's `IdentityProblem` are thin adapters over this type: they convert
/// ``status`` and ``headers`` to their framework's types and send ``json`` as the body, so both middlewares
/// answer the same documents byte for byte (`Integrations/identity-problems.json` pins them).
///
/// ```json
/// {"assertionError":5,"code":"bad-signature","detail":"AssertionError 5: the signature does not verify",
///  "status":401,"title":"Invalid identity token","type":"https://identity-runtime.invalid/problems/bad-signature"}
/// ```
///
/// ``type`` is ``typeBase`` followed by ``code``; ``code`` is stable and meant for programs; ``detail`` is for
/// people and may change. Extension members: ``assertionError`` (the `AssertionError.code`) for token
/// refusals; ``admissionResult`` (the `SwitchIdentityResult` raw value) and ``account`` for admission
/// refusals; ``account`` for `policy-unavailable`. Members that do not apply are left out of the document.
///
/// ## The vocabulary
///
/// | status | code | title | when | made by |
/// |---|---|---|---|---|
/// | 401 | `missing-token` | Identity token required | no assertion header and no `Authorization: Bearer` | ``missingToken(typeBase:)`` |
/// | 401 | `malformed-token` | Invalid identity token | `AssertionError.malformed(_:)`, or the assertion header was sent more than once | ``token(_:typeBase:)`` |
/// | 401 | `unsupported-algorithm` | Invalid identity token | `AssertionError.unsupportedAlgorithm(_:)` | ``token(_:typeBase:)`` |
/// | 401 | `unsupported-header` | Invalid identity token | `AssertionError.unsupportedHeader(_:)` | ``token(_:typeBase:)`` |
/// | 401 | `unknown-key` | Invalid identity token | `AssertionError.unknownKey(_:)` | ``token(_:typeBase:)`` |
/// | 401 | `bad-signature` | Invalid identity token | `AssertionError.badSignature`: forged or tampered | ``token(_:typeBase:)`` |
/// | 401 | `expired-token` | Invalid identity token | `AssertionError.expired(at:)` | ``token(_:typeBase:)`` |
/// | 401 | `token-not-yet-valid` | Invalid identity token | `AssertionError.notYetValid(until:)` | ``token(_:typeBase:)`` |
/// | 401 | `wrong-audience` | Invalid identity token | `AssertionError.wrongAudience(_:)` | ``token(_:typeBase:)`` |
/// | 401 | `wrong-issuer` | Invalid identity token | `AssertionError.wrongIssuer(_:)` | ``token(_:typeBase:)`` |
/// | 401 | `replayed-token` | Invalid identity token | `AssertionError.replayed(tokenID:)` | ``token(_:typeBase:)`` |
/// | 401 | `invalid-account` | Invalid identity token | `AssertionError.invalidAccount(_:)` | ``token(_:typeBase:)`` |
/// | 401 | `token-lifetime-too-long` | Invalid identity token | `AssertionError.lifetimeTooLong(seconds:maximum:)` | ``token(_:typeBase:)`` |
/// | 401 | `invalid-tenant` | Invalid identity token | `AssertionError.invalidTenant(_:)` | ``token(_:typeBase:)`` |
/// | 401 | `tenant-mismatch` | Invalid identity token | the token's `tid` is not the tenant the runtime knows for the account | ``tenantMismatch(claimed:known:typeBase:)`` |
/// | 503 | `replay-cache-full` | Identity service over capacity | `AssertionError.replayCacheFull`: the service is over capacity, not the caller wrong | ``token(_:typeBase:)`` |
/// | 500 | `verification-failed` | Identity verification failed | `AssertionError.cryptoBackendFailure(_:)`: the platform crypto failed | ``token(_:typeBase:)`` |
/// | 401 | `verification-failed` | Invalid identity token | the other errors that are no answer about a token (`AssertionError.invalidKey(_:)`, `AssertionError.unsignable(_:)`, `AssertionError.invalidKeySet(_:)`) | ``token(_:typeBase:)`` |
/// | 503 | `policy-unavailable` | Policy unavailable | the `PolicyManager`'s policy source has not loaded yet (`ProtectionError.policyUnavailable(reason:)`, 115) | ``policyUnavailable(_:account:typeBase:)`` |
/// | 403 | `account-blocked` | Account not admitted | admission refused: `AdmissionError.Cause.blocked(_:)` | ``admission(_:typeBase:)`` |
/// | 403 | `account-not-allowed` | Account not admitted | admission refused: `AdmissionError.Cause.notInAllowedAccounts` | ``admission(_:typeBase:)`` |
/// | 403 | `account-claimed` | Account not admitted | admission refused: `AdmissionError.Cause.claimed` | ``admission(_:typeBase:)`` |
/// | 403 | `admission-denied` | Account not admitted | an `AdmissionCheck` denied the account (it is now blocked) | ``admission(_:typeBase:)`` |
/// | 503 | `admission-unavailable` | Admission undecided | no `AdmissionCheck` could decide now; retry later | ``admission(_:typeBase:)`` |
///
/// Headers (``headers``): every 401 carries `WWW-Authenticate: Bearer` (RFC 6750), `Bearer error="invalid_token"`
/// when a token was sent (all 401s but `missing-token`); every 503 carries `Retry-After: 1`. The content type,
/// ``contentType``, is not among them: whoever renders the document sets it.
public struct IdentityHTTPProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// The default ``typeBase``: under the reserved `.invalid` domain (RFC 2606), which never resolves. A service
    /// sets its own documentation URL.
    public static let defaultTypeBase = "https://identity-runtime.invalid/problems/"

    /// `application/problem+json`, the media type of ``json``.
    public static let contentType = "application/problem+json"

    /// One response header: a name and its value.
    public struct Header: Sendable, Hashable {
        /// The field name, as registered (`WWW-Authenticate`, `Retry-After`).
        public let name: String
        /// The field value.
        public let value: String

        /// A header field `name: value`.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The members of the document: RFC 9457's, then the extensions. ``json`` encodes them with sorted keys and
    /// leaves out the `nil` ones; a client can decode a refusal's body into this type.
    public struct Document: Codable, Sendable, Hashable {
        /// The problem type URI (RFC 9457 `type`).
        public let type: String
        /// A short summary of the problem type (`title`).
        public let title: String
        /// The HTTP status code (`status`).
        public let status: Int
        /// What went wrong with this request (`detail`); never a token or key material.
        public let detail: String
        /// The problem's stable code (`bad-signature`), meant for programs; ``type`` ends with it.
        public let code: String
        /// The `AssertionError.code` when verification refused the token.
        public let assertionError: Int?
        /// The admission result code (a `SwitchIdentityResult`) when admission refused the account.
        public let admissionResult: Int?
        /// The account refused, when the refusal names one.
        public let account: String?

        /// A document with these members; ``IdentityHTTPProblem/json`` leaves the `nil` ones out.
        public init(
            type: String, title: String, status: Int, detail: String, code: String, assertionError: Int? = nil,
            admissionResult: Int? = nil, account: String? = nil
        ) {
            self.type = type
            self.title = title
            self.status = status
            self.detail = detail
            self.code = code
            self.assertionError = assertionError
            self.admissionResult = admissionResult
            self.account = account
        }
    }

    /// The HTTP status code (401, 403, 500 or 503 for the refusals above).
    public let status: Int
    /// The stable, machine-readable code (the last part of ``type``).
    public let code: String
    /// A short summary of the problem type.
    public let title: String
    /// What happened, for people.
    public let detail: String
    /// `AssertionError.code` for a refused token.
    public let assertionError: Int?
    /// `AdmissionError.code` (the `SwitchIdentityResult` raw value) for a refused admission.
    public let admissionResult: Int?
    /// The account refused at admission, or whose policy could not be decided.
    public let account: String?
    /// Whether the request sent a token (shapes `WWW-Authenticate` on a 401).
    public let tokenWasSent: Bool
    /// The start of ``type``; ``code`` follows it.
    public let typeBase: String

    /// A problem in this format. The factories below make the vocabulary's; use this one for a refusal of your
    /// own, with a code of your own.
    public init(
        status: Int, code: String, title: String, detail: String, assertionError: Int? = nil,
        admissionResult: Int? = nil, account: String? = nil, tokenWasSent: Bool,
        typeBase: String = IdentityHTTPProblem.defaultTypeBase
    ) {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.assertionError = assertionError
        self.admissionResult = admissionResult
        self.account = account
        self.tokenWasSent = tokenWasSent
        self.typeBase = typeBase
    }

    /// The problem's `type` URI: ``typeBase`` followed by ``code``.
    public var type: String { typeBase + code }

    /// `"401 bad-signature: AssertionError 5: …"`.
    public var description: String { "\(status) \(code): \(detail)" }

    /// The headers to send besides the content type: `WWW-Authenticate` on a 401, `Retry-After` on a 503.
    public var headers: [Header] {
        switch status {
        case 401: [Header(name: "WWW-Authenticate", value: tokenWasSent ? #"Bearer error="invalid_token""# : "Bearer")]
        case 503: [Header(name: "Retry-After", value: "1")]
        default: []
        }
    }

    /// The document's members.
    public var document: Document {
        Document(
            type: type, title: title, status: status, detail: detail, code: code, assertionError: assertionError,
            admissionResult: admissionResult, account: account)
    }

    /// The problem document as bytes: JSON, keys sorted, slashes unescaped, absent members left out.
    public var json: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and integers only: encoding cannot fail.
        return (try? Array(encoder.encode(document))) ?? Array(#"{"status":\#(status)}"#.utf8)
    }
}

extension IdentityHTTPProblem {
    /// 401 `missing-token`: the request sent no token at all.
    public static func missingToken(typeBase: String = defaultTypeBase) -> IdentityHTTPProblem {
        IdentityHTTPProblem(
            status: 401, code: "missing-token", title: "Identity token required",
            detail: "send a signed identity assertion in the assertion header or as Authorization: Bearer",
            tokenWasSent: false, typeBase: typeBase)
    }

    /// A token the verifier refused: 401 with the error's code, 503 `replay-cache-full`, 500
    /// `verification-failed` for a failure of the platform crypto.
    public static func token(_ error: AssertionError, typeBase: String = defaultTypeBase) -> IdentityHTTPProblem {
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
        let (status, title) = switch error {
        case .cryptoBackendFailure: (500, "Identity verification failed")
        case .replayCacheFull: (503, "Identity service over capacity")
        default: (401, "Invalid identity token")
        }
        return IdentityHTTPProblem(
            status: status, code: code, title: title, detail: error.description, assertionError: error.code,
            tokenWasSent: true, typeBase: typeBase)
    }

    /// 401 `tenant-mismatch`: the token's `tid` (`claimed`) contradicts the runtime's tenant of the account
    /// (`known`).
    public static func tenantMismatch(claimed: String, known: String, typeBase: String = defaultTypeBase) -> IdentityHTTPProblem {
        IdentityHTTPProblem(
            status: 401, code: "tenant-mismatch", title: "Invalid identity token",
            detail: "the token names tenant \(String(reflecting: claimed)), the account belongs to \(String(reflecting: known))",
            tokenWasSent: true, typeBase: typeBase)
    }

    /// 503 `policy-unavailable`: the policy source has not loaded, so whether `account` is managed, and its
    /// policy, are unknown. `error` is the refusal the `PolicyManager` answered
    /// (`ProtectionError.policyUnavailable(reason:)`); its description is the ``detail``.
    public static func policyUnavailable(
        _ error: ProtectionError, account: Identity, typeBase: String = defaultTypeBase
    ) -> IdentityHTTPProblem {
        IdentityHTTPProblem(
            status: 503, code: "policy-unavailable", title: "Policy unavailable", detail: error.description,
            account: account.name, tokenWasSent: true, typeBase: typeBase)
    }

    /// The refusal a middleware answers before admission when `account`'s policy cannot be decided now (the
    /// `PolicyManager`'s policy source has not loaded, so every policy would read as unrestricted): 503
    /// `policy-unavailable`; `nil` when the policy is known. Both middlewares ask this before they return an
    /// admitted identity, so no caller of their `verify(_:)` ever sees an undecided policy.
    public static func policyUnavailable(
        for account: Identity, in policies: PolicyManager, typeBase: String = defaultTypeBase
    ) -> IdentityHTTPProblem? {
        guard let refusal = policies.boundaryStanding(of: account).unavailable else { return nil }
        return policyUnavailable(refusal, account: account, typeBase: typeBase)
    }

    /// A refused admission: 403 for a blocked, disallowed or claimed account and for one an `AdmissionCheck`
    /// denied; 503 `admission-unavailable` when no check could decide.
    public static func admission(_ error: AdmissionError, typeBase: String = defaultTypeBase) -> IdentityHTTPProblem {
        let code = switch error.cause {
        case .blocked: "account-blocked"
        case .notInAllowedAccounts: "account-not-allowed"
        case .claimed: "account-claimed"
        case .denied: "admission-denied"
        case .unavailable: "admission-unavailable"
        }
        let (status, title) = if case .unavailable = error.cause {
            (503, "Admission undecided")
        } else {
            (403, "Account not admitted")
        }
        return IdentityHTTPProblem(
            status: status, code: code, title: title, detail: error.description, admissionResult: error.code,
            account: error.account.name, tokenWasSent: true, typeBase: typeBase)
    }
}

/// A web framework's error type that answers an ``IdentityHTTPProblem``: IdentityHummingbird's and IdentityVapor's
/// `IdentityProblem`. The conforming type converts ``IdentityHTTPProblem/status`` and
/// ``IdentityHTTPProblem/headers`` to its framework's types and sends ``IdentityHTTPProblem/json``; the other
/// members of the problem (`code`, `title`, `detail`, `type`, `assertionError`, `admissionResult`, `account`,
/// `json`) are read through it, and its description is the problem's.
@dynamicMemberLookup
public protocol IdentityHTTPProblemAdapter: CustomStringConvertible {
    /// The framework-neutral problem.
    var problem: IdentityHTTPProblem { get }
    /// The framework's error for `problem`.
    init(_ problem: IdentityHTTPProblem)
}

extension IdentityHTTPProblemAdapter {
    /// A member of ``problem``.
    public subscript<Value>(dynamicMember member: KeyPath<IdentityHTTPProblem, Value>) -> Value {
        problem[keyPath: member]
    }

    /// The problem's description: `"401 bad-signature: AssertionError 5: …"`.
    public var description: String { problem.description }
}
