import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityAssertions
import IdentityHummingbird
import IdentityRuntime
import Testing

/// What `Integrations/identity-problems.json` pins for each case: the status, the headers and the body bytes.
/// The mapping itself (every case, from the runtime's errors) is tested once, in the root package's
/// IdentityHTTPTests; here only that Hummingbird sends the documents unchanged.
func pinnedResponses() throws -> [String: (status: Int, headers: [String: String], body: String)] {
    struct Pinned: Decodable {
        let `case`: String, status: Int, headers: [String: String], body: String
    }
    let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("identity-problems.json")
    let pinned = try JSONDecoder().decode([Pinned].self, from: Data(contentsOf: file))
    return Dictionary(uniqueKeysWithValues: pinned.map { ($0.case, ($0.status, $0.headers, $0.body)) })
}

@Suite("IdentityProblem (Hummingbird): the middleware's real refusals are the pinned documents")
struct ProblemVocabularyTests {
    /// Sends `headers` to the fixture's `/whoami` and compares the answer with the pinned case, byte for byte.
    func expectPinned(
        _ name: String, _ headers: HTTPFields, client: some TestClientProtocol, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let pinned = try #require(try pinnedResponses()[name], sourceLocation: sourceLocation)
        try await client.execute(uri: "/whoami", method: .get, headers: headers) { response in
            #expect(Int(response.status.code) == pinned.status, "\(name)", sourceLocation: sourceLocation)
            #expect(String(buffer: response.body) == pinned.body, "\(name)", sourceLocation: sourceLocation)
            let sent = ["Content-Type", "WWW-Authenticate", "Retry-After"].compactMap { field in
                response.headers[HTTPField.Name(field)!].map { (field, $0) }
            }
            #expect(Dictionary(uniqueKeysWithValues: sent) == pinned.headers, "\(name)", sourceLocation: sourceLocation)
        }
    }

    @Test("missing, forged, unknown-key, wrong-issuer, wrong-audience and tenant-mismatch tokens and a blocked account: the pinned status, headers and bytes")
    func refusals() async throws {
        let fixture = try Fixture()
        let forger = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "k1", issuer: "frontend")
        let unknownKey = IdentityAssertionSigner(key: fixture.signingKey, keyID: "k9", issuer: "frontend")
        let mallory = IdentityAssertionSigner(key: fixture.signingKey, keyID: "k1", issuer: "mallory")
        let cases: [(String, HTTPFields)] = [
            ("missing-token", [:]),
            ("bad-signature", header(try forger.sign(account: alice, tenant: "contoso.com", audience: "documents"))),
            ("unknown-key", [.authorization: "Bearer \(try unknownKey.sign(account: alice, audience: "documents"))"]),
            ("wrong-issuer", header(try mallory.sign(account: alice, audience: "documents"))),
            ("wrong-audience", header(try fixture.token(alice, audience: "billing"))),
            ("tenant-mismatch", header(try fixture.token(alice, tenant: "fabrikam.com"))),
            ("blocked", header(try fixture.token(dave))),
        ]
        try await fixture.application().test(.router) { client in
            for (name, headers) in cases { try await expectPinned(name, headers, client: client) }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("a full replay cache: the pinned 503 replay-cache-full with Retry-After")
    func replayCacheFull() async throws {
        let fixture = try Fixture(replayCacheCapacity: 1)
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/whoami", method: .get, headers: header(try fixture.token(alice))) { response in
                #expect(response.status == .ok)
            }
            try await expectPinned("replay-cache-full", header(try fixture.token(carol)), client: client)
        }
        #expect(fixture.handlerRuns.value == 1)
    }
}
