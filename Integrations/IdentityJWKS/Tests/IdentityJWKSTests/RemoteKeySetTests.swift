import IdentityAssertions
import IdentityRuntime
import NIOCore
import NIOHTTP1
import Testing

@testable import IdentityJWKS

/// A signing key of the issuer "gateway" under a key ID, and the tokens it signs for the audience "documents".
struct TestIssuer {
    let signer: IdentityAssertionSigner

    init(kid: String) throws {
        signer = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: kid, issuer: "gateway")
    }

    func token(account: String = "alice@contoso.com") throws -> String {
        try signer.sign(account: Identity(validating: account), tenant: "contoso.com", audience: "documents")
    }

    static func jwks(_ issuers: [TestIssuer]) -> String {
        var set = AssertionKeySet()
        for issuer in issuers { set.addKey(issuer.signer.key.publicKey, id: issuer.signer.keyID) }
        return set.jwks
    }
}

func makeVerifier() -> IdentityAssertionVerifier {
    IdentityAssertionVerifier(keySet: AssertionKeySet(), issuers: ["gateway"], audience: "documents", mode: .reusable)
}

/// Short intervals, so that the tests wait little.
let quick = RemoteKeySet.Configuration(
    minimumRefreshInterval: .milliseconds(300), maximumRefreshInterval: .seconds(600), defaultRefreshInterval: .seconds(60),
    unknownKeyRefreshInterval: .seconds(60), fetchTimeout: .seconds(5), allowsLoopbackHTTP: true)

/// Runs `body` against a started server, and stops the server afterwards.
func withServer<T>(_ reply: TestJWKSServer.Reply, _ body: (TestJWKSServer) async throws -> T) async throws -> T {
    let server = try await TestJWKSServer.start(reply)
    do {
        let result = try await body(server)
        try await server.stop()
        return result
    } catch {
        try? await server.stop()
        throw error
    }
}

@Suite("RemoteKeySet: fetch, cache, rotation")
struct RemoteKeySetTests {
    @Test("a good fetch installs the keys, and a token signed with them verifies")
    func goodFetch() async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(.document(TestIssuer.jwks([issuer]))) { server in
            let verifier = makeVerifier()
            let keys = try RemoteKeySet(url: server.url, verifier: verifier, configuration: quick)
            #expect(await keys.keySet == nil)
            let set = try await keys.refresh()
            #expect(set.keyIDs == ["k1"])
            #expect(verifier.keyIDs == ["k1"])
            #expect(await keys.lastError == nil)
            let assertion = try await keys.verify(try issuer.token())
            #expect(assertion.account.name == "alice@contoso.com")
            #expect(assertion.tenant == "contoso.com")
            #expect(server.requests == 1)
            #expect(await keys.fetchCount == 1)
        }
    }

    @Test("init empties the verifier's keys: only fetched keys verify")
    func initEmptiesVerifier() async throws {
        let issuer = try TestIssuer(kid: "k1")
        let verifier = IdentityAssertionVerifier(
            keys: ["k1": issuer.signer.key.publicKey], issuers: ["gateway"], audience: "documents")
        _ = try RemoteKeySet(url: "https://127.0.0.1:9/jwks.json", verifier: verifier)
        #expect(verifier.keyIDs.isEmpty)
    }

    @Test("Cache-Control max-age: no fetch before it has passed (clamped to the maximum)")
    func maxAgeHonoured() async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(.document(TestIssuer.jwks([issuer]), cacheControl: "public, max-age=86400")) { server in
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: quick)
            let before = ContinuousClock.now
            await keys.refreshIfStale()
            for _ in 0..<5 { await keys.refreshIfStale() }
            #expect(server.requests == 1)
            let next = await keys.nextRefresh
            // max-age=86400 clamped to the configured maximum of 600 s.
            #expect(next >= before + .seconds(600) && next <= ContinuousClock.now + .seconds(600))
        }
    }

    @Test("Cache-Control no-store / no-cache / max-age=0: fetched again after the minimum interval, not before",
          arguments: ["no-store", "no-cache", "max-age=0", "private, max-age=0, must-revalidate"])
    func noStoreMeansMinimum(_ header: String) async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(.document(TestIssuer.jwks([issuer]), cacheControl: header)) { server in
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: quick)
            await keys.refreshIfStale()
            await keys.refreshIfStale()
            #expect(server.requests == 1)
            try await Task.sleep(for: .milliseconds(400))
            await keys.refreshIfStale()
            await keys.refreshIfStale()
            #expect(server.requests == 2)
        }
    }

    @Test("a token with a new kid triggers one refresh and verifies; another unknown kid right after does not refresh")
    func rotation() async throws {
        let old = try TestIssuer(kid: "2026-10")
        let new = try TestIssuer(kid: "2026-11")
        try await withServer(.document(TestIssuer.jwks([old]), cacheControl: "max-age=3600")) { server in
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: quick)
            try await keys.refresh()
            server.reply = .document(TestIssuer.jwks([old, new]), cacheControl: "max-age=3600")
            let assertion = try await keys.verify(try new.token(account: "bob@fabrikam.com"))
            #expect(assertion.account.name == "bob@fabrikam.com")
            #expect(server.requests == 2)
            #expect(await keys.keySet?.keyIDs == ["2026-10", "2026-11"])
            // Rate limited: within the interval, an unknown kid is refused without a fetch.
            let stranger = try TestIssuer(kid: "made-up")
            await #expect(throws: JWKSVerificationError.refused(.unknownKey("made-up"))) {
                try await keys.verify(try stranger.token())
            }
            #expect(server.requests == 2)
            // Tokens of the old key still verify, from the verifier alone.
            _ = try await keys.verify(try old.token())
            #expect(server.requests == 2)
        }
    }

    @Test("100 concurrent tokens with made-up kids: at most one fetch", arguments: [TimeAmount.zero, .milliseconds(200)])
    func unknownKeyFlood(_ delay: TimeAmount) async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(.document(TestIssuer.jwks([issuer]), cacheControl: "max-age=3600")) { server in
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: quick)
            try await keys.refresh()
            server.reply.delay = delay
            let strangers = try (0..<100).map { try TestIssuer(kid: "made-up-\($0)").token() }
            let refused = await withTaskGroup(of: Bool.self) { group in
                for token in strangers {
                    group.addTask {
                        do throws(JWKSVerificationError) { _ = try await keys.verify(token); return false } catch {
                            guard case .refused(.unknownKey) = error else { return false }
                            return true
                        }
                    }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(refused == 100)
            #expect(server.requests <= 2)
            #expect(server.requests >= 2)  // the flood did ask once
            #expect(await keys.fetchCount == server.requests)
        }
    }

    @Test("concurrent refresh() calls share one fetch")
    func singleFlight() async throws {
        let issuer = try TestIssuer(kid: "k1")
        var reply = TestJWKSServer.Reply.document(TestIssuer.jwks([issuer]))
        reply.delay = .milliseconds(200)
        try await withServer(reply) { server in
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: quick)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 { group.addTask { try await keys.refresh() } }
                try await group.waitForAll()
            }
            #expect(server.requests == 1)
        }
    }

    @Test("Service.run() fetches at once and returns when cancelled")
    func runAsService() async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(.document(TestIssuer.jwks([issuer]), cacheControl: "max-age=3600")) { server in
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: quick)
            let running = Task { try await keys.run() }
            for _ in 0..<200 where await keys.keySet == nil { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await keys.keySet?.keyIDs == ["k1"])
            running.cancel()
            try await running.value
            #expect(server.requests == 1)
        }
    }
}
