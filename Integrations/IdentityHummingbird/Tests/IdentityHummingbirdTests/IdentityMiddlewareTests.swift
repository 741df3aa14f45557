import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityHummingbird
import IdentityPolicy
import IdentityAssertions
import IdentityHTTP
import IdentityRuntime
import IdentityTesting
import Synchronization
import Testing

let alice: Identity = "alice@contoso.com"
let dave: Identity = "dave@contoso.com"
let carol: Identity = "carol@fabrikam.com"

/// One service under test: keys, a verifier for audience "documents", a policy manager with two tenants
/// (contoso encrypts files, fabrikam does not) and dave blocked, and a router with the middleware in front of
/// `/whoami`, which reports what the handler and its hops see.
struct Fixture {
    let signingKey: AssertionSigningKey
    let signer: IdentityAssertionSigner
    let verifier: IdentityAssertionVerifier
    let policies: PolicyManager
    let handlerRuns = HandlerRuns()

    /// Contoso encrypts files, fabrikam does not.
    static func tenantPolicies() -> StaticPolicySource {
        StaticPolicySource(tenants: [
            "contoso.com": Policy(identity: nil, isFileEncryptionRequired: true),
            "fabrikam.com": Policy(identity: nil, isFileEncryptionRequired: false),
        ])
    }

    init(replayCacheCapacity: Int = 100_000, policySource: (any PolicySource)? = nil) throws {
        signingKey = try AssertionSigningKey()
        signer = IdentityAssertionSigner(key: signingKey, keyID: "k1", issuer: "frontend")
        verifier = IdentityAssertionVerifier(
            keys: ["k1": signingKey.publicKey], issuers: ["frontend"], audience: "documents",
            replayCacheCapacity: replayCacheCapacity)
        policies = PolicyManager(policySource: policySource ?? Self.tenantPolicies())
        for account in [alice, dave, carol] { policies.registerAccount(account) }
        policies.blockAccount(dave, reason: .clockedOut)
    }

    func token(_ account: Identity, tenant: String? = nil, audience: String = "documents") throws -> String {
        try signer.sign(account: account, tenant: tenant ?? TenantID.domain(of: account)?.rawValue, audience: audience)
    }

    func application() -> some ApplicationProtocol {
        let router = Router(context: BasicIdentityRequestContext.self)
        router.add(middleware: IdentityMiddleware(verifier: verifier, policies: policies))
        let runs = handlerRuns
        router.get("/whoami") { _, context -> String in
            runs.increment()
            let queue = IdentityDispatchQueue(label: "hop")
            let onQueue: Identity? = await withCheckedContinuation { done in
                queue.async { done.resume(returning: IdentityContext.effectiveFileIdentity) }
            }
            let inTask = await Task { IdentityContext.effectiveFileIdentity }.value
            let viaQueueThenTask: Identity? = await withCheckedContinuation { done in
                queue.async { Task { done.resume(returning: IdentityContext.effectiveFileIdentity) } }
            }
            let detached = await Task.detached { IdentityContext.effectiveFileIdentity }.value
            let raw: Identity? = await withCheckedContinuation { done in
                DispatchQueue.global().async { done.resume(returning: IdentityContext.effectiveFileIdentity) }
            }
            let admitted = context.admittedIdentity
            return [
                admitted?.account.name ?? "-", IdentityContext.currentThreadIdentity?.name ?? "-",
                onQueue?.name ?? "-", inTask?.name ?? "-", viaQueueThenTask?.name ?? "-",
                detached?.name ?? "-", raw?.name ?? "-",
                admitted.map { $0.policy.isFileEncryptionRequired ? "encrypts" : "clear" } ?? "-",
                admitted?.tenant ?? "-", admitted?.source.rawValue ?? "-",
            ].joined(separator: " ")
        }
        router.get("/missing") { _, _ -> String in
            runs.increment()
            throw HTTPError(.notFound, message: "no such document")
        }
        return Application(router: router)
    }
}

final class HandlerRuns: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// The problem document of a refusal.
func problem(_ response: TestResponse) throws -> IdentityHTTPProblem.Document {
    #expect(response.headers[.contentType] == IdentityHTTPProblem.contentType)
    return try JSONDecoder().decode(IdentityHTTPProblem.Document.self, from: Data(buffer: response.body))
}

func header(_ token: String) -> HTTPFields {
    [HTTPField.Name("x-identity-assertion")!: token]
}

@Suite("IdentityMiddleware: verified identity, admission, problem+json, propagation")
struct IdentityMiddlewareTests {
    @Test("a valid assertion: the handler, an IdentityDispatchQueue block, a Task and a queue-then-Task hop run as the account; detached work and a raw queue do not; the policy is in the context")
    func validAssertion() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .ok)
                let seen = String(buffer: response.body).split(separator: " ").map(String.init)
                #expect(seen == [
                    "alice@contoso.com", "alice@contoso.com", "alice@contoso.com", "alice@contoso.com",
                    "alice@contoso.com", "-", "-", "encrypts", "contoso.com", "assertionHeader",
                ])
            }
        }
    }

    @Test("Authorization: Bearer carries the same assertion; another tenant gets its own policy")
    func bearerToken() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(carol)
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: [.authorization: "Bearer \(token)"]) { response in
                #expect(response.status == .ok)
                let seen = String(buffer: response.body).split(separator: " ").map(String.init)
                #expect(seen.first == "carol@fabrikam.com")
                #expect(seen[7] == "clear")
                #expect(seen.last == "bearerToken")
            }
        }
    }

    @Test("no token: 401 missing-token with WWW-Authenticate: Bearer; another scheme is no token")
    func missing() async throws {
        let fixture = try Fixture()
        try await fixture.application().test(.router) { client in
            for headers: HTTPFields in [[:], [.authorization: "Basic YWxpY2U6c2VjcmV0"]] {
                try await client.execute(uri: "/whoami", method: .get, headers: headers) { response in
                    #expect(response.status == .unauthorized)
                    #expect(response.headers[.wwwAuthenticate] == "Bearer")
                    let body = try problem(response)
                    #expect(body.code == "missing-token")
                    #expect(body.status == 401)
                    #expect(body.type == "https://identity-runtime.invalid/problems/missing-token")
                    #expect(!body.title.isEmpty && !body.detail.isEmpty)
                }
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("a forged token (another key under the same key ID): 401 bad-signature, the handler never runs")
    func forged() async throws {
        let fixture = try Fixture()
        let forger = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "k1", issuer: "frontend")
        let token = try forger.sign(account: alice, tenant: "contoso.com", audience: "documents")
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate] == #"Bearer error="invalid_token""#)
                let body = try problem(response)
                #expect(body.code == "bad-signature")
                #expect(body.assertionError == AssertionError.badSignature.code)
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("a tampered payload, alg none and a garbage bearer token: 401 with the verifier's code")
    func tampered() async throws {
        let fixture = try Fixture()
        let parts = try fixture.token(alice).split(separator: ".").map(String.init)
        let otherClaims = try fixture.token(carol).split(separator: ".").map(String.init)[1]
        let noneHeader = Data(#"{"alg":"none","kid":"k1","typ":"JWT"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
        let cases: [(String, String)] = [
            ([parts[0], otherClaims, parts[2]].joined(separator: "."), "bad-signature"),
            ([noneHeader, parts[1], ""].joined(separator: "."), "unsupported-algorithm"),
            ([noneHeader, parts[1], parts[2]].joined(separator: "."), "unsupported-algorithm"),
            ("not-a-token", "malformed-token"),
        ]
        try await fixture.application().test(.router) { client in
            for (token, code) in cases {
                try await client.execute(uri: "/whoami", method: .get, headers: [.authorization: "Bearer \(token)"]) { response in
                    #expect(response.status == .unauthorized)
                    let problemCode = try problem(response).code
                    #expect(problemCode == code)
                }
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("an expired token: 401 expired-token")
    func expired() async throws {
        let fixture = try Fixture()
        let token = try fixture.signer.sign(
            account: alice, tenant: "contoso.com", audience: "documents", lifetime: 60, now: Date().addingTimeInterval(-3_600))
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .unauthorized)
                let problemCode = try problem(response).code
                    #expect(problemCode == "expired-token")
            }
        }
    }

    @Test("a token for another audience: 401 wrong-audience")
    func wrongAudience() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice, audience: "billing")
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .unauthorized)
                let body = try problem(response)
                #expect(body.code == "wrong-audience")
                #expect(body.assertionError == 8)
            }
        }
    }

    @Test("a token sent twice: the first is served, the replay gets 401 replayed-token")
    func replay() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .ok)
            }
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .unauthorized)
                let problemCode = try problem(response).code
                    #expect(problemCode == "replayed-token")
            }
        }
        #expect(fixture.handlerRuns.value == 1)
    }

    @Test("a blocked account with a valid token: 403 account-blocked with the SwitchIdentityResult code, the handler never runs")
    func blocked() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(dave)
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .forbidden)
                #expect(response.headers[.wwwAuthenticate] == nil)
                let body = try problem(response)
                #expect(body.code == "account-blocked")
                #expect(body.status == 403)
                #expect(body.admissionResult == SwitchIdentityResult.notAllowed.rawValue)
                #expect(body.account == "dave@contoso.com")
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("a policy source that has not loaded: 503 policy-unavailable with Retry-After, the handler never runs; once it loads, the account is served with its policy")
    func policyNotLoaded() async throws {
        let source = LatePolicySource()
        let fixture = try Fixture(policySource: source)
        let app = fixture.application()
        try await app.test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(try fixture.token(alice))) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.retryAfter] == "1")
                let body = try problem(response)
                #expect(body.code == "policy-unavailable")
                #expect(body.account == "alice@contoso.com")
                #expect(body.detail.hasPrefix("ProtectionError 115:"))
            }
        }
        #expect(fixture.handlerRuns.value == 0)
        source.load(Fixture.tenantPolicies().policies)
        try await app.test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(try fixture.token(alice))) { response in
                #expect(response.status == .ok)
                // The account, then its policy: contoso encrypts files.
                let words = String(buffer: response.body).split(separator: " ").map(String.init)
                #expect(words.first == "alice@contoso.com" && words.count > 7 && words[7] == "encrypts")
            }
        }
        #expect(fixture.handlerRuns.value == 1)
    }

    @Test("a token whose tid is not the account's tenant: 401 tenant-mismatch")
    func tenantMismatch() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice, tenant: "fabrikam.com")
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                #expect(response.status == .unauthorized)
                let problemCode = try problem(response).code
                    #expect(problemCode == "tenant-mismatch")
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("the assertion header sent twice is refused, not resolved by picking one")
    func twoAssertionHeaders() async throws {
        let fixture = try Fixture()
        var twice = header(try fixture.token(alice))
        twice.append(HTTPField(name: HTTPField.Name("x-identity-assertion")!, value: try fixture.token(carol)))
        let headers = twice
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: headers) { response in
                #expect(response.status == .unauthorized)
                let problemCode = try problem(response).code
                    #expect(problemCode == "malformed-token")
            }
        }
    }

    @Test("an error of the handler is the handler's (404), not an admission refusal")
    func handlerErrorPassesThrough() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/missing", method: .get, headers: header(token)) { response in
                #expect(response.status == .notFound)
            }
        }
        #expect(fixture.handlerRuns.value == 1)
    }

    @Test("concurrent requests for different accounts each see their own account at every hop", arguments: [8, 32])
    func concurrentAccounts(requests: Int) async throws {
        let fixture = try Fixture()
        let accounts: [Identity] = [alice, carol]
        let tokens = try (0..<requests).map { try fixture.token(accounts[$0 % 2]) }
        try await fixture.application().test(.router) { client in
            try await withThrowingTaskGroup(of: (Identity, [String]).self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask {
                        try await client.execute(uri: "/whoami", method: .get, headers: header(token)) { response in
                            (accounts[index % 2], String(buffer: response.body).split(separator: " ").map(String.init))
                        }
                    }
                }
                for try await (account, seen) in group {
                    #expect(Array(seen.prefix(5)) == Array(repeating: account.name, count: 5))
                }
            }
        }
    }
}
