import Foundation
import GRPCCore
import IdentityAssertions
import IdentityGRPC
import IdentityPolicy
import IdentityRuntime
import IdentityTesting
import Testing

/// A provider that records whom it was asked for.
final class RecordingProvider: IdentityTokenProvider {
    let inner: ReusableTokenProvider
    let asked = Locked<[Identity]>([])
    init(_ inner: ReusableTokenProvider) { self.inner = inner }
    func token(for account: Identity) async throws -> String {
        asked.withLock { $0.append(account) }
        return try await inner.token(for: account)
    }
}

struct ProviderDown: Error {}

func outcome<Value>(_ body: () async throws -> Value) async -> Result<Value, any Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}

struct FailingProvider: IdentityTokenProvider {
    func token(for account: Identity) async throws -> String { throw ProviderDown() }
}

@Suite("IdentityClientInterceptor: a token for the calling task's identity, none without one", .exclusiveProcessIdentity)
struct ClientInterceptorTests {
    func assertionInterceptor(_ fixture: Fixture) -> IdentityClientInterceptor {
        IdentityClientInterceptor(signer: fixture.signer, audience: "documents", tenant: { TenantID.domain(of: $0)?.rawValue })
    }

    @Test("with a thread identity: a single-use assertion per call, the server admits that account (unary, server, client and bidirectional streaming)")
    func withIdentity() async throws {
        let fixture = try Fixture()
        let (unary, counted, collected, echoed) = try await fixture.withClient(clientInterceptors: [assertionInterceptor(fixture)]) { client in
            try await IdentityContext.withThreadIdentity(alice) {
                (try await client.whoAmI(), try await client.count(2), try await client.collect(["a", "b"]),
                 try await client.echo(["c", "d"]))
            }
        }
        for report in [unary] + counted + collected + echoed {
            #expect(report.carried == Array(repeating: alice.name, count: 6))
            #expect(report.source == "assertionHeader")
        }
        #expect(fixture.service.runs.value == 4)
    }

    @Test("calls from an IdentityDispatchQueue block and from an IdentityOperationQueue operation carry the submitter's identity")
    func fromWrappedQueues() async throws {
        let fixture = try Fixture()
        try await fixture.withClient(clientInterceptors: [assertionInterceptor(fixture)]) { client in
            let queue = IdentityDispatchQueue(label: "caller")
            let operations = IdentityOperationQueue()
            let fromQueue: Result<Report, any Error> = await IdentityContext.withThreadIdentity(carol) {
                await withCheckedContinuation { done in
                    queue.async { Task { done.resume(returning: await outcome { try await client.whoAmI() }) } }
                }
            }
            let fromOperation: Result<Report, any Error> = await IdentityContext.withThreadIdentity(alice) {
                await withCheckedContinuation { done in
                    operations.addOperation { Task { done.resume(returning: await outcome { try await client.whoAmI() }) } }
                }
            }
            let (queued, operated) = (try fromQueue.get(), try fromOperation.get())
            #expect(queued.thread == carol.name)
            #expect(operated.thread == alice.name)
        }
    }

    @Test("no thread identity, the unmanaged identity, a detached task, or only a process identity: no token is sent (the server answers missing-token)")
    func withoutIdentity() async throws {
        let fixture = try Fixture()
        let errors = try await fixture.withClient(clientInterceptors: [assertionInterceptor(fixture)]) { client in
            let none = await rpcError { try await client.whoAmI() }
            let unmanaged = await IdentityContext.withThreadIdentity(Identity.unmanaged) {
                await rpcError { try await client.whoAmI() }
            }
            let detached = await IdentityContext.withThreadIdentity(alice) {
                await Task.detached { await rpcError { try await client.whoAmI() } }.value
            }
            IdentityContext.processIdentity = alice
            defer { IdentityContext.processIdentity = nil }
            let processOnly = await rpcError { try await client.whoAmI() }
            return [none, unmanaged, detached, processOnly]
        }
        for error in errors {
            #expect(error?.code == .unauthenticated)
            #expect(error.flatMap(IdentityProblem.init)?.code == "missing-token")
        }
        #expect(fixture.service.runs.value == 0)
    }

    @Test("a token the caller left in the metadata never travels: without an identity it is removed, with one it is replaced")
    func neverAnotherIdentitysToken() async throws {
        let fixture = try Fixture()
        let carolsAssertion = assertion(try fixture.token(carol))
        var carolsBoth = carolsAssertion
        carolsBoth.add(contentsOf: bearer(try fixture.token(carol)))
        let single = assertionInterceptor(fixture)
        let reusableFixture = try Fixture(mode: .reusable)
        // Single-use assertions: the assertion key is the interceptor's.
        let (anonymous, asAlice) = try await fixture.withClient(clientInterceptors: [single]) { client in
            (await rpcError { try await client.whoAmI(carolsAssertion) },
             try await IdentityContext.withThreadIdentity(alice) { try await client.whoAmI(carolsAssertion) })
        }
        #expect(anonymous.flatMap(IdentityProblem.init)?.code == "missing-token")
        #expect(asAlice.thread == alice.name)
        // Bearer tokens: authorization and the assertion key are the interceptor's.
        let reusableProvider = ReusableTokenProvider(signer: reusableFixture.signer, audience: "documents")
        let (anonymousBearer, asAliceBearer) = try await reusableFixture.withClient(
            clientInterceptors: [IdentityClientInterceptor(tokenProvider: reusableProvider)]
        ) { client in
            (await rpcError { try await client.whoAmI(carolsBoth) },
             try await IdentityContext.withThreadIdentity(alice) { try await client.whoAmI(carolsBoth) })
        }
        #expect(anonymousBearer.flatMap(IdentityProblem.init)?.code == "missing-token")
        #expect(asAliceBearer.thread == alice.name)
        #expect(asAliceBearer.source == "bearerToken")
    }

    @Test("reusable bearer tokens: one token per account, reused across calls by a reusable verifier; two accounts get two tokens")
    func reusableTokens() async throws {
        let fixture = try Fixture(mode: .reusable)
        let provider = RecordingProvider(ReusableTokenProvider(signer: fixture.signer, audience: "documents"))
        let reports = try await fixture.withClient(clientInterceptors: [IdentityClientInterceptor(tokenProvider: provider)]) { client in
            var reports: [Report] = []
            for account in [alice, carol, alice, carol, alice] {
                reports.append(try await IdentityContext.withThreadIdentity(account) { try await client.whoAmI() })
            }
            return reports
        }
        #expect(reports.map(\.thread) == [alice, carol, alice, carol, alice].map(\.name))
        #expect(reports.allSatisfy { $0.source == "bearerToken" })
        #expect(provider.asked.withLock { $0 } == [alice, carol, alice, carol, alice])
        let aliceToken = try provider.inner.currentToken(for: alice)
        #expect(try provider.inner.currentToken(for: alice) == aliceToken)
        #expect(try provider.inner.currentToken(for: carol) != aliceToken)
    }

    @Test("a reusable token is renewed when its renewal time has come")
    func renewal() throws {
        let fixture = try Fixture()
        let now = Locked(Date())
        let provider = ReusableTokenProvider(
            signer: fixture.signer, audience: "documents", lifetime: 100, renewalMargin: 10,
            clock: { now.withLock { $0 } })
        let first = try provider.currentToken(for: alice)
        now.withLock { $0 += 89 }
        #expect(try provider.currentToken(for: alice) == first)
        now.withLock { $0 += 2 }
        #expect(try provider.currentToken(for: alice) != first)
    }

    @Test("a provider that fails: the call fails here with unauthenticated and is never sent")
    func providerFails() async throws {
        let fixture = try Fixture()
        let error = try await fixture.withClient(clientInterceptors: [IdentityClientInterceptor(tokenProvider: FailingProvider())]) { client in
            await IdentityContext.withThreadIdentity(alice) { await rpcError { try await client.whoAmI() } }
        }
        #expect(error?.code == .unauthenticated)
        #expect(error?.cause is ProviderDown)
        #expect(error.flatMap(IdentityProblem.init) == nil)
        #expect(fixture.service.runs.value == 0)
    }
}
