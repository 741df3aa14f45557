import Foundation
import GRPCCore
import IdentityAssertions
import IdentityGRPC
import IdentityHTTP
import IdentityPolicy
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("IdentityServerInterceptor: verified identity, admission, status codes, propagation", .exclusiveProcessIdentity)
struct ServerInterceptorTests {
    @Test("a valid assertion: the handler, an IdentityDispatchQueue block, an IdentityOperationQueue operation, a Task and a queue-then-Task hop run as the account; detached work and a raw queue do not")
    func unaryHandlerAndHops() async throws {
        let fixture = try Fixture()
        let report = try await fixture.withClient { client in try await client.whoAmI(assertion(try fixture.token(alice))) }
        #expect(report.carried == Array(repeating: alice.name, count: 6))
        #expect(report.notCarried == ["-", "-"])
        #expect(report.tenant == "contoso.com")
        #expect(report.policy == "encrypts")
        #expect(report.source == "assertionHeader")
    }

    @Test("authorization: Bearer carries the same assertion; another tenant gets its own policy")
    func bearerToken() async throws {
        let fixture = try Fixture()
        let report = try await fixture.withClient { client in try await client.whoAmI(bearer(try fixture.token(carol))) }
        #expect(report.carried == Array(repeating: carol.name, count: 6))
        #expect(report.tenant == "fabrikam.com")
        #expect(report.policy == "clear")
        #expect(report.source == "bearerToken")
    }

    @Test("the caller of the server sees no identity before and after the call: the scope is the handler's only")
    func noLeakAfterTheCall() async throws {
        let fixture = try Fixture()
        try await fixture.withClient { client in
            _ = try await client.whoAmI(assertion(try fixture.token(alice)))
            #expect(IdentityContext.currentThreadIdentity == nil)
            #expect(AdmittedIdentity.current == nil)
        }
    }

    /// A refusal: the token's metadata and what the client must get back.
    struct Refusal: Sendable, CustomTestStringConvertible {
        let name: String
        let code: RPCError.Code
        let problem: String
        let status: Int
        let metadata: @Sendable (Fixture) throws -> Metadata
        var testDescription: String { "\(name): \(code) \(problem)" }
    }

    static let refusals: [Refusal] = [
        Refusal(name: "no token", code: .unauthenticated, problem: "missing-token", status: 401) { _ in [:] },
        Refusal(name: "another scheme", code: .unauthenticated, problem: "missing-token", status: 401) { _ in
            ["authorization": "Basic YWxpY2U6c2VjcmV0"]
        },
        Refusal(name: "forged", code: .unauthenticated, problem: "bad-signature", status: 401) { _ in
            let forger = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "k1", issuer: "frontend")
            return assertion(try forger.sign(account: alice, tenant: "contoso.com", audience: "documents"))
        },
        Refusal(name: "garbage bearer", code: .unauthenticated, problem: "malformed-token", status: 401) { _ in
            bearer("not-a-token")
        },
        Refusal(name: "expired", code: .unauthenticated, problem: "expired-token", status: 401) { fixture in
            assertion(try fixture.signer.sign(
                account: alice, tenant: "contoso.com", audience: "documents", lifetime: 60,
                now: Date().addingTimeInterval(-3_600)))
        },
        Refusal(name: "wrong audience", code: .unauthenticated, problem: "wrong-audience", status: 401) { fixture in
            assertion(try fixture.token(alice, audience: "billing"))
        },
        Refusal(name: "tenant mismatch", code: .unauthenticated, problem: "tenant-mismatch", status: 401) { fixture in
            assertion(try fixture.token(alice, tenant: "fabrikam.com"))
        },
        Refusal(name: "assertion key twice", code: .unauthenticated, problem: "malformed-token", status: 401) { fixture in
            var metadata = assertion(try fixture.token(alice))
            metadata.addString(try fixture.token(carol), forKey: "x-identity-assertion")
            return metadata
        },
        Refusal(name: "blocked account", code: .permissionDenied, problem: "account-blocked", status: 403) { fixture in
            assertion(try fixture.token(dave))
        },
    ]

    @Test("refusals: the gRPC status code, the runtime's code in the message and the metadata, the problem readable back; the handler never runs", arguments: refusals)
    func refused(_ refusal: Refusal) async throws {
        let fixture = try Fixture()
        let metadata = try refusal.metadata(fixture)
        let error = try #require(await fixture.withClient { client in await rpcError { try await client.whoAmI(metadata) } })
        #expect(error.code == refusal.code)
        #expect(error.message.hasPrefix("\(refusal.problem): "))
        #expect(Array(error.metadata[stringValues: IdentityProblem.codeMetadataKey]) == [refusal.problem])
        #expect(Array(error.metadata[stringValues: IdentityProblem.statusMetadataKey]) == [String(refusal.status)])
        let problem = try #require(IdentityProblem(error))
        #expect(problem.code == refusal.problem)
        #expect(problem.status == refusal.status)
        #expect(problem.type == IdentityHTTPProblem.defaultTypeBase + refusal.problem)
        if refusal.status == 401 {
            let challenge = refusal.problem == "missing-token" ? "Bearer" : #"Bearer error="invalid_token""#
            #expect(Array(error.metadata[stringValues: "www-authenticate"]) == [challenge])
        }
        if refusal.problem == "account-blocked" {
            #expect(problem.admissionResult == SwitchIdentityResult.notAllowed.rawValue)
            #expect(problem.account == dave.name)
        }
        #expect(fixture.service.runs.value == 0)
    }

    @Test("a token sent twice to a single-use verifier: the first is served, the replay gets unauthenticated replayed-token")
    func replay() async throws {
        let fixture = try Fixture()
        let token = try fixture.token(alice)
        let error = try await fixture.withClient { client in
            _ = try await client.whoAmI(assertion(token))
            return await rpcError { try await client.whoAmI(assertion(token)) }
        }
        #expect(error?.code == .unauthenticated)
        #expect(error.flatMap(IdentityProblem.init)?.code == "replayed-token")
        #expect(fixture.service.runs.value == 1)
    }

    @Test("a policy source that has not loaded: unavailable policy-unavailable with retry-after, the handler never runs; once it loads, the account is served with its policy")
    func policyNotLoaded() async throws {
        let source = LatePolicySource()
        let fixture = try Fixture(policySource: source)
        let error = try await fixture.withClient { client in
            await rpcError { try await client.whoAmI(assertion(try fixture.token(alice))) }
        }
        #expect(error?.code == .unavailable)
        #expect(error?.message.hasPrefix("policy-unavailable: ProtectionError 115:") == true)
        #expect(error.map { Array($0.metadata[stringValues: "retry-after"]) } == ["1"])
        #expect(error.flatMap(IdentityProblem.init)?.account == alice.name)
        #expect(fixture.service.runs.value == 0)
        source.load(Fixture.tenantPolicies().policies)
        let report = try await fixture.withClient { client in try await client.whoAmI(assertion(try fixture.token(alice))) }
        #expect(report.thread == alice.name && report.policy == "encrypts")
    }

    @Test("an admission check that cannot decide: unavailable admission-unavailable; one that denies: permissionDenied admission-denied")
    func admissionChecks() async throws {
        let fixture = try Fixture()
        fixture.policies.registerAdmissionCheck(ClosureAdmissionCheck { account, reason in
            #expect(reason.description == "gRPC /identity.Probe/WhoAmI")
            return switch account {
            case alice: .unavailable("directory unreachable")
            case carol: .deny("tenant suspended")
            default: .admit
            }
        })
        let (undecided, denied, admitted) = try await fixture.withClient { client in
            (await rpcError { try await client.whoAmI(assertion(try fixture.token(alice))) },
             await rpcError { try await client.whoAmI(assertion(try fixture.token(carol))) },
             try await client.whoAmI(assertion(try fixture.token(bob))))
        }
        #expect(undecided?.code == .unavailable)
        #expect(undecided.flatMap(IdentityProblem.init)?.code == "admission-unavailable")
        #expect(denied?.code == .permissionDenied)
        #expect(denied.flatMap(IdentityProblem.init)?.code == "admission-denied")
        #expect(admitted.thread == bob.name)
        #expect(fixture.service.runs.value == 1)
    }

    @Test("an error of the handler is the handler's (notFound), not an identity refusal")
    func handlerErrorPassesThrough() async throws {
        let fixture = try Fixture()
        let error = try await fixture.withClient { client in
            await rpcError { try await client.missing(assertion(try fixture.token(alice))) }
        }
        #expect(error?.code == .notFound)
        #expect(error.flatMap(IdentityProblem.init) == nil)
        #expect(fixture.service.runs.value == 1)
    }

    @Test("concurrent calls for two tenants on one connection each see their own account at every hop", arguments: [8, 32])
    func concurrentTenants(calls: Int) async throws {
        let fixture = try Fixture()
        let accounts: [Identity] = [alice, carol]
        let tokens = try (0..<calls).map { try fixture.token(accounts[$0 % 2]) }
        try await fixture.withClient { client in
            try await withThrowingTaskGroup(of: (Identity, Report).self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask { (accounts[index % 2], try await client.whoAmI(assertion(token))) }
                }
                for try await (account, report) in group {
                    #expect(report.carried == Array(repeating: account.name, count: 6))
                    #expect(report.tenant == TenantID.domain(of: account)?.rawValue)
                }
            }
        }
    }
}
