import IdentityAssertions
import NIOHTTP1
import Testing

@testable import IdentityJWKS

@Suite("RemoteKeySet: failures keep the last good set; none ever means deny")
struct RemoteKeySetFailureTests {
    /// A bad answer of the endpoint, and the error it must give.
    struct BadAnswer: Sendable, CustomTestStringConvertible {
        let name: String
        let reply: TestJWKSServer.Reply
        let matches: @Sendable (JWKSFetchError) -> Bool
        var testDescription: String { name }
    }

    static let badAnswers: [BadAnswer] = {
        let x = String(repeating: "A", count: 43)
        var chunked = TestJWKSServer.Reply.document(String(repeating: " ", count: 70_000) + "{}")
        chunked.chunked = true
        return [
            BadAnswer(name: "HTTP 500", reply: .init(status: .internalServerError, body: Array("oops".utf8))) { $0 == .httpStatus(500) },
            BadAnswer(name: "HTTP 404", reply: .init(status: .notFound)) { $0 == .httpStatus(404) },
            BadAnswer(name: "garbage", reply: .document("<html>not json</html>")) {
                if case .invalidDocument(.notJSON) = $0 { true } else { false }
            },
            BadAnswer(name: "empty body", reply: .document("")) {
                if case .invalidDocument(.notJSON) = $0 { true } else { false }
            },
            BadAnswer(name: "not a key set", reply: .document(#"{"issuer":"x"}"#)) { $0 == .invalidDocument(.notAKeySet("no keys member")) },
            BadAnswer(
                name: "a private member",
                reply: .document(#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"\#(x)","d":"\#(x)"}]}"#)
            ) { $0 == .invalidDocument(.privateKeyMember(key: 0, member: "d")) },
            BadAnswer(name: "oversized, announced by Content-Length", reply: .document(String(repeating: " ", count: 70_000) + "{}")) {
                $0 == .bodyTooLarge(maximum: AssertionKeySet.maximumJWKSLength)
            },
            BadAnswer(name: "oversized, chunked", reply: chunked) { $0 == .bodyTooLarge(maximum: AssertionKeySet.maximumJWKSLength) },
        ]
    }()

    @Test("a bad answer: typed lastError, the last good set kept and verifying", arguments: badAnswers)
    func badAnswerKeepsLastGoodSet(_ bad: BadAnswer) async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(.document(TestIssuer.jwks([issuer]), cacheControl: "no-store")) { server in
            let verifier = makeVerifier()
            let keys = try RemoteKeySet(url: server.url, verifier: verifier, configuration: quick)
            try await keys.refresh()
            server.reply = bad.reply
            do throws(JWKSFetchError) {
                try await keys.refresh()
                Issue.record("the refresh succeeded")
            } catch {
                #expect(bad.matches(error), "\(error)")
            }
            let lastError = try #require(await keys.lastError)
            #expect(bad.matches(lastError), "\(lastError)")
            #expect(await keys.keySet?.keyIDs == ["k1"])
            #expect(verifier.keyIDs == ["k1"])
            _ = try await keys.verify(try issuer.token())
            // A good answer again clears the error.
            server.reply = .document(TestIssuer.jwks([issuer]))
            try await keys.refresh()
            #expect(await keys.lastError == nil)
        }
    }

    /// Connection refused: the HTTP client retries until the deadline, then reports the connection failure
    /// (or, when it reports none, the deadline).
    static func isDown(_ error: JWKSFetchError) -> Bool {
        switch error {
        case .transport, .timeout: true
        default: false
        }
    }

    static var downConfiguration: RemoteKeySet.Configuration {
        var configuration = quick
        configuration.fetchTimeout = .milliseconds(500)
        return configuration
    }

    @Test("the endpoint down: a transport error (or the deadline), the last good set kept")
    func endpointDown() async throws {
        let issuer = try TestIssuer(kid: "k1")
        let server = try await TestJWKSServer.start(.document(TestIssuer.jwks([issuer])))
        let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: Self.downConfiguration)
        try await keys.refresh()
        try await server.stop()
        await #expect {
            try await keys.refresh()
        } throws: { error in
            (error as? JWKSFetchError).map(Self.isDown) ?? false
        }
        #expect(await keys.keySet?.keyIDs == ["k1"])
        _ = try await keys.verify(try issuer.token())
        // A token of a key never seen is refused as an unknown key, not as a fetch failure.
        await #expect(throws: JWKSVerificationError.refused(.unknownKey("k2"))) {
            try await keys.verify(try TestIssuer(kid: "k2").token())
        }
    }

    @Test("never a good set: every token is refused with keysUnavailable and the fetch failure",
          arguments: [TestJWKSServer.Reply(status: .serviceUnavailable), .document("garbage")])
    func neverGood(_ reply: TestJWKSServer.Reply) async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(reply) { server in
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: quick)
            let token = try issuer.token()
            do throws(JWKSVerificationError) {
                _ = try await keys.verify(token)
                Issue.record("verified without a key set")
            } catch {
                guard case let .keysUnavailable(cause) = error else { Issue.record("\(error)"); return }
                if reply.status == .ok {
                    guard case .invalidDocument(.notJSON) = cause else { Issue.record("\(cause)"); return }
                } else {
                    #expect(cause == .httpStatus(503))
                }
            }
            // Rate limited now: refused all the same, without another fetch.
            await #expect(throws: JWKSVerificationError.self) { try await keys.verify(try issuer.token()) }
            #expect(server.requests == 1)
        }
    }

    @Test("never a good set, nothing listening: refused")
    func neverGoodNothingListening() async throws {
        let server = try await TestJWKSServer.start(.init())
        let url = server.url
        try await server.stop()
        let keys = try RemoteKeySet(url: url, verifier: makeVerifier(), configuration: Self.downConfiguration)
        await #expect {
            _ = try await keys.verify(try TestIssuer(kid: "k1").token())
        } throws: { error in
            guard case let .keysUnavailable(cause) = error as? JWKSVerificationError else { return false }
            return Self.isDown(cause)
        }
    }

    @Test("an endpoint that never answers: timeout within the deadline, the last good set kept")
    func timeout() async throws {
        let issuer = try TestIssuer(kid: "k1")
        try await withServer(.document(TestIssuer.jwks([issuer]))) { server in
            var configuration = quick
            configuration.fetchTimeout = .milliseconds(300)
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: configuration)
            try await keys.refresh()
            server.reply.hang = true
            let started = ContinuousClock.now
            await #expect(throws: JWKSFetchError.timeout) { try await keys.refresh() }
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(await keys.lastError == .timeout)
            #expect(await keys.keySet?.keyIDs == ["k1"])
        }
    }

    @Test("a body that stalls half-way: timeout")
    func stalledBody() async throws {
        // The head promises more bytes than are ever sent.
        var reply = TestJWKSServer.Reply.document("{\"keys\":[]}")
        reply.announcedLength = 2_000
        try await withServer(reply) { server in
            var configuration = quick
            configuration.fetchTimeout = .milliseconds(300)
            let keys = try RemoteKeySet(url: server.url, verifier: makeVerifier(), configuration: configuration)
            await #expect(throws: JWKSFetchError.timeout) { try await keys.refresh() }
            #expect(await keys.keySet == nil)
        }
    }
}

@Suite("CacheControl")
struct CacheControlTests {
    let minimum = Duration.seconds(60), maximum = Duration.seconds(3_600), fallback = Duration.seconds(600)

    @Test("refresh intervals", arguments: [
        ("max-age=120", 120), ("public, max-age=120", 120), ("MAX-AGE = 120", 120), ("max-age=\"120\"", 120),
        ("max-age=5", 60), ("max-age=999999999999999999999999", 3_600), ("no-store", 60), ("no-cache, max-age=900", 60),
        ("max-age=-1", 600), ("max-age=abc", 600), ("", 600), ("max-age=120, max-age=900", 120),
    ])
    func intervals(_ header: String, _ seconds: Int) {
        let control = CacheControl(headerValues: [header])
        #expect(control.refreshInterval(minimum: minimum, maximum: maximum, fallback: fallback) == .seconds(seconds))
    }
}
