import Foundation
import IdentityAssertions
import IdentityHTTP
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

/// One pinned document of `Integrations/identity-problems.json`: what both middlewares answer for a case.
struct PinnedProblem: Decodable, Sendable, CustomTestStringConvertible {
    let `case`: String
    let status: Int
    let headers: [String: String]
    let body: String

    var testDescription: String { self.case }

    static let all: [PinnedProblem] = {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let file = root.appendingPathComponent("Integrations").appendingPathComponent("identity-problems.json")
        do {
            return try JSONDecoder().decode([PinnedProblem].self, from: Data(contentsOf: file))
        } catch {
            Issue.record("cannot read \(file.path): \(error)")
            return []
        }
    }()
}

@Suite("IdentityHTTPProblem: the problem vocabulary, pinned by Integrations/identity-problems.json")
struct ProblemVocabularyTests {
    static let dave: Identity = "dave@contoso.com"
    static let instant = Date(timeIntervalSince1970: 1_700_000_000)

    /// The input of each pinned case.
    static let inputs: [String: IdentityHTTPProblem] = {
        let tokens: [String: AssertionError] = [
            "malformed": .malformed("not three parts"),
            "unsupported-algorithm": .unsupportedAlgorithm("none"),
            "unsupported-header": .unsupportedHeader("jwk"),
            "unknown-key": .unknownKey("k9"),
            "bad-signature": .badSignature,
            "expired": .expired(at: instant),
            "not-yet-valid": .notYetValid(until: instant),
            "wrong-audience": .wrongAudience("billing"),
            "wrong-issuer": .wrongIssuer("mallory"),
            "replayed": .replayed(tokenID: "0f1e"),
            "replay-cache-full": .replayCacheFull,
            "invalid-account": .invalidAccount("empty"),
            "lifetime-too-long": .lifetimeTooLong(seconds: 7_200, maximum: 3_600),
            "invalid-tenant": .invalidTenant("empty"),
        ]
        let admissions: [String: AdmissionError] = [
            "blocked": AdmissionError(account: dave, result: .notAllowed, cause: .blocked(.clockedOut)),
            "not-allowed": AdmissionError(account: dave, result: .notAllowed, cause: .notInAllowedAccounts),
            "claimed": AdmissionError(account: dave, result: .notAllowed, cause: .claimed),
            "denied": AdmissionError(account: dave, result: .failed, cause: .denied("token revoked")),
            "undecided": AdmissionError(account: dave, result: .failed, cause: .unavailable("directory down")),
        ]
        var inputs = tokens.mapValues { IdentityHTTPProblem.token($0) }
        inputs.merge(admissions.mapValues { IdentityHTTPProblem.admission($0) }) { $1 }
        inputs["missing-token"] = .missingToken()
        inputs["tenant-mismatch"] = .tenantMismatch(claimed: "fabrikam.com", known: "contoso.com")
        return inputs
    }()

    @Test("the pinned file holds every case, once, and nothing else")
    func pinnedCases() {
        let names = PinnedProblem.all.map(\.case)
        #expect(names.count == 21)
        #expect(Set(names) == Set(Self.inputs.keys))
    }

    @Test("each case: the status, the headers (with the content type) and the JSON bytes of the pinned document", arguments: PinnedProblem.all)
    func pinnedDocument(_ pinned: PinnedProblem) throws {
        let problem = try #require(Self.inputs[pinned.case])
        #expect(problem.status == pinned.status)
        #expect(String(decoding: problem.json, as: UTF8.self) == pinned.body)
        var headers = ["Content-Type": IdentityHTTPProblem.contentType]
        for header in problem.headers { headers[header.name] = header.value }
        #expect(headers == pinned.headers)
        // The document decodes back to the problem's members.
        let document = try JSONDecoder().decode(IdentityHTTPProblem.Document.self, from: Data(problem.json))
        #expect(document == problem.document)
        #expect(document.type == problem.type)
        #expect(problem.type == IdentityHTTPProblem.defaultTypeBase + problem.code)
    }

    @Test("policy-unavailable (both middlewares' refusal before the policy source loads): 503, Retry-After, the account")
    func policyUnavailable() {
        let error = ProtectionError.policyUnavailable(reason: "the policy source has not loaded yet")
        let problem = IdentityHTTPProblem.policyUnavailable(error, account: "alice@contoso.com")
        #expect(String(decoding: problem.json, as: UTF8.self) == #"{"account":"alice@contoso.com","code":"policy-unavailable","detail":"ProtectionError 115: the policy is unavailable: the policy source has not loaded yet","status":503,"title":"Policy unavailable","type":"https://identity-runtime.invalid/problems/policy-unavailable"}"#)
        #expect(problem.headers == [.init(name: "Retry-After", value: "1")])
    }

    @Test("policyUnavailable(for:in:): the problem until the policy source has loaded, nil after")
    func policyUnavailableForAccount() {
        let source = LatePolicySource()
        let policies = PolicyManager(policySource: source)
        let problem = IdentityHTTPProblem.policyUnavailable(for: "alice@contoso.com", in: policies)
        #expect(problem?.code == "policy-unavailable" && problem?.status == 503 && problem?.account == "alice@contoso.com")
        source.load()
        #expect(IdentityHTTPProblem.policyUnavailable(for: "alice@contoso.com", in: policies) == nil)
    }

    @Test("the errors that are no answer about a token: verification-failed, 500 for the platform crypto, else 401")
    func verificationFailed() {
        let crypto = IdentityHTTPProblem.token(.cryptoBackendFailure("EVP failed"))
        #expect(crypto.status == 500)
        #expect(crypto.code == "verification-failed")
        #expect(crypto.title == "Identity verification failed")
        #expect(crypto.headers.isEmpty)
        for error in [AssertionError.invalidKey("31 bytes"), .unsignable("far future")] {
            let problem = IdentityHTTPProblem.token(error)
            #expect(problem.status == 401)
            #expect(problem.code == "verification-failed")
            #expect(problem.assertionError == error.code)
            #expect(problem.headers == [.init(name: "WWW-Authenticate", value: #"Bearer error="invalid_token""#)])
        }
    }

    @Test("a type base of the service's own: type is the base followed by the code")
    func typeBase() {
        let problem = IdentityHTTPProblem.token(.badSignature, typeBase: "https://docs.example/errors#")
        #expect(problem.type == "https://docs.example/errors#bad-signature")
        #expect(String(decoding: problem.json, as: UTF8.self).contains(#""type":"https://docs.example/errors#bad-signature""#))
        #expect(problem.description == "401 bad-signature: AssertionError 5: the signature does not verify")
    }
}

@Suite("IdentityHTTPToken: where a request's token is found")
struct TokenRulesTests {
    func found(
        _ values: [String], authorization: String? = nil, acceptsBearerToken: Bool = true
    ) -> Result<IdentityHTTPToken, IdentityHTTPProblem> {
        Result { () throws(IdentityHTTPProblem) in
            try IdentityHTTPToken(
                assertionHeader: "x-identity-assertion", values: values, authorization: authorization,
                acceptsBearerToken: acceptsBearerToken)
        }
    }

    @Test("the assertion header first, then Authorization: Bearer (scheme case-insensitive), else missing-token")
    func order() throws {
        #expect(try found(["a.b.c"], authorization: "Bearer x.y.z").get() == IdentityHTTPToken(token: "a.b.c", source: .assertionHeader))
        #expect(try found([], authorization: "Bearer x.y.z").get() == IdentityHTTPToken(token: "x.y.z", source: .bearerToken))
        #expect(try found([], authorization: "bEaReR x.y.z").get().token == "x.y.z")
        for authorization in [nil, "Basic dXNlcg==", "Bearer", "Bearerx.y.z"] {
            #expect(throws: IdentityHTTPProblem.missingToken()) { try found([], authorization: authorization).get() }
        }
        #expect(throws: IdentityHTTPProblem.missingToken()) {
            try found([], authorization: "Bearer x.y.z", acceptsBearerToken: false).get()
        }
    }

    @Test("the assertion header twice: malformed-token naming the count and the header")
    func repeatedHeader() {
        #expect(throws: IdentityHTTPProblem.token(.malformed("2 x-identity-assertion headers"))) {
            try found(["a.b.c", "d.e.f"], authorization: "Bearer x.y.z").get()
        }
    }

    @Test("Authorization lines joined with \", \" are one value: a second line does not make a second token")
    func joinedAuthorization() throws {
        #expect(try found([], authorization: "Bearer x.y.z, Bearer u.v.w").get().token == "x.y.z, Bearer u.v.w")
        #expect(throws: IdentityHTTPProblem.missingToken()) { try found([], authorization: "Basic dXNlcg==, Bearer x.y.z").get() }
    }
}
