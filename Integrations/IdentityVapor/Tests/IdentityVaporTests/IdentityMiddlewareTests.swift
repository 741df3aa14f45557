import Foundation
import IdentityPolicy
import IdentityRuntime
import IdentityTesting
@testable import IdentityVapor
import Testing
import Vapor
import VaporTesting

@Suite("IdentityMiddleware (Vapor): verified identity, admission, problem+json, propagation")
struct IdentityMiddlewareTests {
    // MARK: The happy path

    @Test("a valid assertion: the handler, an IdentityDispatchQueue block, a Task and a queue-then-Task hop run as the account; detached work and a raw queue do not; the policy is on the request")
    func validAssertion() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: header(token)) { response in
                #expect(response.status == .ok)
                #expect(words(response) == [
                    "alice@contoso.com", "alice@contoso.com", "alice@contoso.com", "alice@contoso.com",
                    "alice@contoso.com", "-", "-", "encrypts", "contoso.com", "assertionHeader", "encrypts",
                ])
                // Middleware in front runs without the identity, and reads the admitted one after the chain.
                #expect(response.headers.first(name: "x-front-identity") == "-")
                #expect(response.headers.first(name: "x-admitted") == "alice@contoso.com")
            }
        }
        #expect(fixture.handlerRuns.value == 1)
    }

    @Test("Authorization: Bearer carries the same assertion (scheme case-insensitive); another tenant gets its own policy")
    func bearerToken() async throws {
        let fixture = try Fixture()
        try await fixture.withApplication { app in
            for scheme in ["Bearer", "bearer", "BEARER"] {
                let token = try fixture.token(carol)
                try await app.testing().test(.GET, "whoami", headers: ["Authorization": "\(scheme) \(token)"]) { response in
                    #expect(response.status == .ok)
                    let seen = words(response)
                    #expect(seen.first == "carol@fabrikam.com")
                    #expect(seen[7] == "clear" && seen[10] == "clear")
                    #expect(seen[9] == "bearerToken")
                }
            }
        }
    }

    @Test("the identity holds across sleeps, yields, an event-loop hop, a Task, async let and a task group")
    func identityAcrossAwaits() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "hops", headers: header(token)) { response in
                #expect(response.status == .ok)
                let (seen, policy) = try #require(hopsResult(String(buffer: response.body)))
                #expect(seen.count == 16)
                #expect(Set(seen) == [alice.name])
                #expect(policy == "encrypts")
            }
        }
    }

    @Test("a streamed request body is read under the identity")
    func streamedRequestBody() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        let body = ByteBuffer(repeating: 0x61, count: 100_000)
        try await fixture.withLiveServer { server in
            let response = try await server.send(.POST, "upload", headers: header(token), body: body)
            #expect(response.status == .ok)
            #expect(response.text == "100000 alice@contoso.com")
        }
    }

    @Test("a streamed response body is written after the handler returned: without a snapshot it has no identity, in the handler's IdentitySnapshot it has the account")
    func streamedResponseBody() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        try await fixture.withLiveServer { server in
            let response = try await server.send(.GET, "stream", headers: header(token))
            #expect(response.status == .ok)
            #expect(response.text == "- alice@contoso.com")
        }
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "stream", headers: header(try fixture.token(alice))) { response in
                #expect(String(buffer: response.body) == "- alice@contoso.com")
            }
        }
    }

    // MARK: Errors of the handler

    @Test("an error of the handler is the handler's, rendered by Vapor's ErrorMiddleware, never a refusal: Abort 404, a thrown error 500, and an AdmissionError of the handler's own (it admits another, blocked account) 500, not a 403 problem")
    func handlerErrorsPassThrough() async throws {
        let fixture = try Fixture()
        let cases: [(path: String, status: HTTPResponseStatus, reason: String?)] = [
            ("missing", .notFound, "no such document"), ("fails", .internalServerError, nil),
            ("admits-another", .internalServerError, nil),
        ]
        try await fixture.withApplication { app in
            for (path, status, reason) in cases {
                try await app.testing().test(.GET, path, headers: header(try fixture.token(alice))) { response in
                    #expect(response.status == status, "\(path)")
                    #expect(response.headers.first(name: .contentType) != "application/problem+json", "\(path)")
                    if let reason { #expect(String(buffer: response.body).contains(reason)) }
                }
            }
        }
        #expect(fixture.handlerRuns.value == cases.count)
    }

    // MARK: Refusals: the token

    @Test("no token: 401 missing-token with WWW-Authenticate: Bearer; another scheme, an empty header list and a bare 'Bearer' are no token")
    func missing() async throws {
        let fixture = try Fixture()
        try await fixture.withApplication { app in
            let cases: [HTTPHeaders] = [[:], ["Authorization": "Basic YWxpY2U6c2VjcmV0"], ["Authorization": "Bearer"]]
            for headers in cases {
                try await app.testing().test(.GET, "whoami", headers: headers) { response in
                    #expect(response.status == .unauthorized)
                    #expect(response.headers.first(name: .wwwAuthenticate) == "Bearer")
                    let body = try problem(response)
                    #expect(body.code == "missing-token")
                    #expect(body.status == 401)
                    #expect(body.type == "https://identity-runtime.invalid/problems/missing-token")
                    #expect(body.title == "Identity token required")
                    #expect(body.assertionError == nil && body.admissionResult == nil && body.account == nil)
                }
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("a forged token (another key under the same key ID): 401 bad-signature with the AssertionError code")
    func forged() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice, forged: true)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: header(token)) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers.first(name: .wwwAuthenticate) == #"Bearer error="invalid_token""#)
                let body = try problem(response)
                #expect(body.code == "bad-signature")
                #expect(body.assertionError == 5)
                #expect(body.title == "Invalid identity token")
                #expect(body.detail == "AssertionError 5: the signature does not verify")
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("a tampered payload, alg none, a garbage token and an unknown key: 401 with the verifier's code")
    func tampered() async throws {
        let fixture = try Fixture()
        let parts = try fixture.token(alice).split(separator: ".").map(String.init)
        let otherClaims = try fixture.token(carol).split(separator: ".").map(String.init)[1]
        let noneHeader = Data(#"{"alg":"none","kid":"k1","typ":"JWT"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
        let cases: [(String, String, Int)] = [
            ([parts[0], otherClaims, parts[2]].joined(separator: "."), "bad-signature", 5),
            ([noneHeader, parts[1], ""].joined(separator: "."), "unsupported-algorithm", 2),
            ([noneHeader, parts[1], parts[2]].joined(separator: "."), "unsupported-algorithm", 2),
            ("not-a-token", "malformed-token", 1),
            (try fixture.token(alice, keyID: "k9"), "unknown-key", 4),
        ]
        try await fixture.withApplication { app in
            for (token, code, assertionError) in cases {
                try await app.testing().test(.GET, "whoami", headers: ["Authorization": "Bearer \(token)"]) { response in
                    #expect(response.status == .unauthorized)
                    let body = try problem(response)
                    #expect(body.code == code)
                    #expect(body.assertionError == assertionError)
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
        try await expectRefusal(fixture, headers: header(token), status: .unauthorized, code: "expired-token", assertionError: 6)
    }

    @Test("a token for another audience: 401 wrong-audience; from an untrusted issuer: 401 wrong-issuer")
    func wrongAudienceAndIssuer() async throws {
        let fixture = try Fixture()
        try await expectRefusal(
            fixture, headers: header(try fixture.token(alice, audience: "billing")), status: .unauthorized,
            code: "wrong-audience", assertionError: 8)
        try await expectRefusal(fixture, headers: header(try fixture.token(alice, issuer: "mallory")), status: .unauthorized, code: "wrong-issuer", assertionError: 9)
    }

    @Test("a token sent twice: the first is served, the replay gets 401 replayed-token")
    func replay() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: header(token)) { response in
                #expect(response.status == .ok)
            }
            try await app.testing().test(.GET, "whoami", headers: header(token)) { response in
                #expect(response.status == .unauthorized)
                let code = try problem(response).code
                #expect(code == "replayed-token")
            }
        }
        #expect(fixture.handlerRuns.value == 1)
    }

    @Test("a full replay cache: 503 replay-cache-full with Retry-After: 1")
    func replayCacheFull() async throws {
        let fixture = try Fixture(replayCacheCapacity: 1)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: header(try fixture.token(alice))) { response in
                #expect(response.status == .ok)
            }
            try await app.testing().test(.GET, "whoami", headers: header(try fixture.token(alice))) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers.first(name: .retryAfter) == "1")
                #expect(response.headers.first(name: .wwwAuthenticate) == nil)
                let body = try problem(response)
                #expect(body.code == "replay-cache-full")
                #expect(body.title == "Identity service over capacity")
                #expect(body.assertionError == 11)
            }
        }
        #expect(fixture.handlerRuns.value == 1)
    }

    @Test("a token whose tid is not the account's tenant: 401 tenant-mismatch; with checksTenant off it is served")
    func tenantMismatch() async throws {
        let fixture = try Fixture()
        try await expectRefusal(
            fixture, headers: header(try fixture.token(alice, tenant: "fabrikam.com")), status: .unauthorized,
            code: "tenant-mismatch")
        let token = try fixture.token(alice, tenant: "fabrikam.com")
        try await fixture.withApplication(behind: fixture.middleware(checksTenant: false)) { app in
            try await app.testing().test(.GET, "whoami", headers: header(token)) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "alice@contoso.com contoso.com")
            }
        }
    }

    @Test("the assertion header sent twice is refused, not resolved by picking one; so are two Authorization headers")
    func twoHeaders() async throws {
        let fixture = try Fixture()
        var twice = header(try fixture.token(alice))
        twice.add(name: "X-Identity-Assertion", value: try fixture.token(carol))
        try await expectRefusal(fixture, headers: twice, status: .unauthorized, code: "malformed-token", assertionError: 1)
        var twoAuthorizations: HTTPHeaders = ["Authorization": "Bearer \(try fixture.token(alice))"]
        twoAuthorizations.add(name: .authorization, value: "Bearer \(try fixture.token(carol))")
        try await expectRefusal(fixture, headers: twoAuthorizations, status: .unauthorized, code: "malformed-token", assertionError: 1)
    }

    @Test("the options: a custom assertion header (read case-insensitively; the default one is then no token), acceptsBearerToken off (Authorization: Bearer is no token), problemTypeBase")
    func options() async throws {
        let fixture = try Fixture()
        let custom = fixture.middleware(
            assertionHeader: "X-Gateway-Identity", acceptsBearerToken: false, problemTypeBase: "https://docs.example/errors#")
        try await fixture.withApplication(behind: custom) { app in
            try await app.testing().test(.GET, "whoami", headers: ["x-gateway-identity": try fixture.token(carol)]) { response in
                #expect(String(buffer: response.body) == "carol@fabrikam.com fabrikam.com")
            }
            let refused: [HTTPHeaders] = [header(try fixture.token(carol)), ["Authorization": "Bearer \(try fixture.token(carol))"]]
            for headers in refused {
                try await app.testing().test(.GET, "whoami", headers: headers) { response in
                    #expect(response.status == .unauthorized)
                    let body = try problem(response)
                    #expect(body.code == "missing-token")
                    #expect(body.type == "https://docs.example/errors#missing-token")
                }
            }
        }
    }

    @Test("header names match without case, and only whole: AUTHORIZATION and X-IDENTITY-ASSERTION carry a token, a name of the same length that differs carries none")
    func headerNamesWithoutCase() async throws {
        let fixture = try Fixture()
        try await fixture.withApplication(behind: fixture.middleware()) { app in
            let accepted: [HTTPHeaders] = [
                ["AUTHORIZATION": "Bearer \(try fixture.token(alice))"],
                ["X-IDENTITY-ASSERTION": try fixture.token(alice)],
                ["aUtHoRiZaTiOn": "bearer \(try fixture.token(alice))"],
            ]
            for headers in accepted {
                try await app.testing().test(.GET, "whoami", headers: headers) { response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == "alice@contoso.com contoso.com")
                }
            }
            let unnamed: [HTTPHeaders] = [
                ["Authorizatioq": "Bearer \(try fixture.token(alice))"],
                ["x-identity-assertioo": try fixture.token(alice)],
                ["x-identity_assertion": try fixture.token(alice)],
            ]
            for headers in unnamed {
                try await app.testing().test(.GET, "whoami", headers: headers) { response in
                    #expect(response.status == .unauthorized)
                    let body = try problem(response)
                    #expect(body.code == "missing-token")
                }
            }
        }
    }

    @Test("a name that differs from the assertion header only in bit 0x20 of a byte that is not a letter is another header: no token alone, and no second assertion beside the real one")
    func headerNamesDifferingOutsideLetters() async throws {
        let fixture = try Fixture()
        try await fixture.withApplication(behind: fixture.middleware(assertionHeader: "x-assert~ion")) { app in
            try await app.testing().test(.GET, "whoami", headers: ["x-assert^ion": try fixture.token(alice)]) { response in
                #expect(response.status == .unauthorized)
                let body = try problem(response)
                #expect(body.code == "missing-token")
            }
            let both: HTTPHeaders = ["X-ASSERT~ION": try fixture.token(alice), "x-assert^ion": try fixture.token(carol)]
            try await app.testing().test(.GET, "whoami", headers: both) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "alice@contoso.com contoso.com")
            }
        }
    }

    // MARK: Refusals: admission and policies

    @Test("a blocked account with a valid token: 403 account-blocked with the SwitchIdentityResult code, no WWW-Authenticate")
    func blocked() async throws {
        let fixture = try Fixture()
        let response = try await expectRefusal(
            fixture, headers: header(try fixture.token(dave)), status: .forbidden, code: "account-blocked")
        #expect(response.headers.first(name: .wwwAuthenticate) == nil)
        let body = try problem(response)
        #expect(body.admissionResult == SwitchIdentityResult.notAllowed.rawValue)
        #expect(body.account == "dave@contoso.com")
        #expect(body.title == "Account not admitted")
        #expect(body.assertionError == nil)
    }

    @Test("an account outside allowedAccounts: 403 account-not-allowed")
    func notAllowed() async throws {
        let fixture = try Fixture()
        fixture.policies.allowedAccounts = [alice]
        let response = try await expectRefusal(
            fixture, headers: header(try fixture.token(carol)), status: .forbidden, code: "account-not-allowed")
        let account = try problem(response).account
        #expect(account == "carol@fabrikam.com")
    }

    @Test("an AdmissionCheck that denies: 403 admission-denied (and the account is blocked after); one that cannot decide: 503 admission-unavailable with Retry-After")
    func admissionChecks() async throws {
        let fixture = try Fixture()
        fixture.policies.registerAdmissionCheck(ClosureAdmissionCheck { account, reason in
            // Checks run as the account, with the request's reason.
            guard IdentityContext.currentThreadIdentity == account, reason.description == "GET /whoami" else {
                return .deny("wrong context")
            }
            switch account {
            case alice: return .deny("token revoked")
            case carol: return .unavailable("directory down")
            default: return .admit
            }
        })
        let denied = try await expectRefusal(
            fixture, headers: header(try fixture.token(alice)), status: .forbidden, code: "admission-denied")
        let detail = try problem(denied).detail
        #expect(detail.contains("token revoked"))
        let admissionResult = try problem(denied).admissionResult
        #expect(admissionResult == SwitchIdentityResult.failed.rawValue)
        #expect(fixture.policies.blockReason(for: alice) != .notBlocked)
        let undecided = try await expectRefusal(
            fixture, headers: header(try fixture.token(carol)), status: .serviceUnavailable, code: "admission-unavailable")
        #expect(undecided.headers.first(name: .retryAfter) == "1")
        let title = try problem(undecided).title
        #expect(title == "Admission undecided")
    }

    @Test("an AdmissionCheck that admits: the first request runs it (in a task) and the handler runs as the account; the next, whose pass is trusted, is admitted on the event loop and runs as the account too")
    func admittedByCheckThenWithoutWaiting() async throws {
        let fixture = try Fixture()
        let runs = HandlerRuns()
        fixture.policies.registerAdmissionCheck(ClosureAdmissionCheck { _, _ in
            runs.increment()
            return .admit
        })
        try await fixture.withApplication { app in
            for _ in 0..<2 {
                try await app.testing().test(.GET, "whoami", headers: header(try fixture.token(alice))) { response in
                    #expect(response.status == .ok)
                    #expect(Array(words(response).prefix(5)) == Array(repeating: "alice@contoso.com", count: 5))
                    #expect(response.headers.first(name: "x-front-identity") == "-")
                }
            }
        }
        #expect(runs.value == 1)
        #expect(fixture.handlerRuns.value == 2)
    }

    @Test("a policy source that has not loaded: 503 policy-unavailable, the handler never runs; once it loads, the account is served with its policy")
    func policyNotLoaded() async throws {
        let source = LatePolicySource()
        let fixture = try Fixture(policySource: source)
        let response = try await expectRefusal(
            fixture, headers: header(try fixture.token(alice)), status: .serviceUnavailable, code: "policy-unavailable")
        #expect(response.headers.first(name: .retryAfter) == "1")
        let body = try problem(response)
        #expect(body.account == "alice@contoso.com")
        #expect(body.detail.hasPrefix("ProtectionError 115:"))
        source.load(Fixture.tenantPolicies().policies)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: header(try fixture.token(alice))) { response in
                #expect(response.status == .ok)
                #expect(words(response).last == "encrypts")
            }
        }
    }

    @Test("verify(_:) alone: the admitted identity, or the typed problem; it sets nothing on the request")
    func verifyAlone() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(carol)
        try await withApp { app in
            let request = Request(application: app, method: .GET, url: "/x", headers: header(token), on: app.eventLoopGroup.next())
            let admitted = try fixture.middleware.verify(request)
            #expect(admitted.account == carol && admitted.tenant == "fabrikam.com" && admitted.source == .assertionHeader)
            #expect(admitted.assertion.audience == "documents")
            #expect(request.admittedIdentity == nil)
            do throws(IdentityProblem) {
                _ = try fixture.middleware.verify(request)
                Issue.record("the token was accepted twice")
            } catch {
                #expect(error.code == "replayed-token")
                #expect(error.status == .unauthorized && error.reason == error.detail)
                #expect(error.headers.first(name: .wwwAuthenticate) == #"Bearer error="invalid_token""#)
            }
        }
    }

    /// Sends one request that must be refused with `status` and `code` (and `assertionError`), without
    /// running a handler; returns the response.
    @discardableResult
    func expectRefusal(
        _ fixture: Fixture, headers: HTTPHeaders, status: HTTPResponseStatus, code: String, assertionError: Int? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> TestingHTTPResponse {
        let before = fixture.handlerRuns.value
        var result: TestingHTTPResponse?
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: headers) { response in
                result = response
                #expect(response.status == status, sourceLocation: sourceLocation)
                let body = try problem(response)
                #expect(body.code == code, sourceLocation: sourceLocation)
                #expect(body.status == Int(status.code), sourceLocation: sourceLocation)
                #expect(body.type == "https://identity-runtime.invalid/problems/\(code)", sourceLocation: sourceLocation)
                if let assertionError { #expect(body.assertionError == assertionError, sourceLocation: sourceLocation) }
                #expect(response.headers.first(name: "x-admitted") == "-", "a refused request carries an admitted identity", sourceLocation: sourceLocation)
            }
        }
        #expect(fixture.handlerRuns.value == before, "a refused request ran a handler", sourceLocation: sourceLocation)
        return try #require(result)
    }
}

/// The identities `/hops` saw and the policy it read.
func hopsResult(_ text: String) -> ([String], String)? {
    let parts = text.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
    guard parts.count == 2 else { return nil }
    return (parts[0].split(separator: " ").map(String.init), parts[1])
}
