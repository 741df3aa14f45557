import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import IdentityHummingbird
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// The problem documents both middlewares must answer, byte for byte: `Integrations/identity-problems.json`.
/// IdentityVapor's `ProblemVocabularyTests` reads the same file with the same cases.
struct SharedProblem: Decodable {
    let `case`: String
    let status: Int
    let headers: [String: String]
    let body: String

    static func all() throws -> [SharedProblem] {
        let integrations = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let data = try Data(contentsOf: integrations.appendingPathComponent("identity-problems.json"))
        return try JSONDecoder().decode([SharedProblem].self, from: data)
    }
}

@Suite("IdentityProblem: the vocabulary shared with IdentityVapor")
struct ProblemVocabularyTests {
    /// The inputs of each shared case (the same in IdentityVapor's test).
    static func problem(_ name: String) -> IdentityProblem? {
        let base = "https://identity-runtime.invalid/problems/"
        let instant = Date(timeIntervalSince1970: 1_700_000_000)
        let assertion: AssertionError? = switch name {
        case "malformed": .malformed("not three parts")
        case "unsupported-algorithm": .unsupportedAlgorithm("none")
        case "unsupported-header": .unsupportedHeader("jwk")
        case "unknown-key": .unknownKey("k9")
        case "bad-signature": .badSignature
        case "expired": .expired(at: instant)
        case "not-yet-valid": .notYetValid(until: instant)
        case "wrong-audience": .wrongAudience("billing")
        case "wrong-issuer": .wrongIssuer("mallory")
        case "replayed": .replayed(tokenID: "0f1e")
        case "replay-cache-full": .replayCacheFull
        case "invalid-account": .invalidAccount("empty")
        case "lifetime-too-long": .lifetimeTooLong(seconds: 7_200, maximum: 3_600)
        case "invalid-tenant": .invalidTenant("empty")
        default: nil
        }
        if let assertion { return .token(assertion, typeBase: base) }
        let admission: (SwitchIdentityResult, AdmissionError.Cause)? = switch name {
        case "blocked": (.notAllowed, .blocked(.clockedOut))
        case "not-allowed": (.notAllowed, .notInAllowedAccounts)
        case "claimed": (.notAllowed, .claimed)
        case "denied": (.failed, .denied("token revoked"))
        case "undecided": (.failed, .unavailable("directory down"))
        default: nil
        }
        if case let (result, cause)? = admission {
            return .admission(AdmissionError(account: dave, result: result, cause: cause), typeBase: base)
        }
        switch name {
        case "missing-token": return .missingToken(typeBase: base)
        case "tenant-mismatch": return .tenantMismatch(claimed: "fabrikam.com", known: "contoso.com", typeBase: base)
        default: return nil
        }
    }

    @Test("every shared case, answered through the router: the same status, headers and JSON bytes as Integrations/identity-problems.json")
    func sharedDocuments() async throws {
        let shared = try SharedProblem.all()
        #expect(shared.count == 21)
        let router = Router(context: BasicIdentityRequestContext.self)
        router.get("/problem/:case") { _, context -> String in
            throw Self.problem(context.parameters.get("case") ?? "") ?? HTTPError(.notFound)
        }
        try await Application(router: router).test(.router) { client in
            for expected in shared {
                #expect(Self.problem(expected.case) != nil, "no Hummingbird problem for \(expected.case)")
                try await client.execute(uri: "/problem/\(expected.case)", method: .get) { response in
                    #expect(response.status.code == expected.status, "\(expected.case)")
                    #expect(String(buffer: response.body) == expected.body, "\(expected.case)")
                    var headers: [String: String] = [:]
                    for name in ["Content-Type", "WWW-Authenticate", "Retry-After"] {
                        headers[name] = response.headers[HTTPField.Name(name)!]
                    }
                    #expect(headers == expected.headers, "\(expected.case)")
                }
            }
        }
    }
}
