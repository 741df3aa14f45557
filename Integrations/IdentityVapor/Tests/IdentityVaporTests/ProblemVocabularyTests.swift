import Foundation
import IdentityHTTP
import IdentityRuntime
import IdentityTesting
import IdentityVapor
import Testing
import Vapor
import VaporTesting

/// The documents `Integrations/identity-problems.json` pins, by case. The mapping from the runtime's errors is
/// tested once, in the root package's IdentityHTTPTests; this suite tests what is Vapor's: that the
/// middleware's real responses carry those documents unchanged.
struct PinnedDocuments {
    struct Entry: Decodable {
        let `case`: String
        let status: Int
        let headers: [String: String]
        let body: String
    }

    let entries: [String: Entry]

    init() throws {
        var folder = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { folder.deleteLastPathComponent() }
        let data = try Data(contentsOf: folder.appendingPathComponent("identity-problems.json"))
        entries = Dictionary(uniqueKeysWithValues: try JSONDecoder().decode([Entry].self, from: data).map { ($0.case, $0) })
    }

    /// Whether `response` is the pinned `name`: status, `Content-Type`, `WWW-Authenticate`, `Retry-After`, body.
    func expect(_ response: TestingHTTPResponse, is name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let entry = entries[name] else {
            Issue.record("\(name) is not pinned", sourceLocation: sourceLocation)
            return
        }
        #expect(Int(response.status.code) == entry.status, "\(name)", sourceLocation: sourceLocation)
        #expect(response.body.string == entry.body, "\(name)", sourceLocation: sourceLocation)
        var sent: [String: String] = [:]
        for field in ["Content-Type", "WWW-Authenticate", "Retry-After"] {
            sent[field] = response.headers.first(name: field)
        }
        #expect(sent == entry.headers, "\(name)", sourceLocation: sourceLocation)
    }
}

@Suite("IdentityProblem (Vapor): the middleware's real refusals are the pinned documents")
struct ProblemVocabularyTests {
    @Test("missing, forged, unknown-key, wrong-issuer, wrong-audience and tenant-mismatch tokens and a blocked account: the pinned status, headers and bytes")
    func refusals() async throws {
        let pinned = try PinnedDocuments()
        let fixture = try Fixture()
        let requests: [String: HTTPHeaders] = [
            "missing-token": [:],
            "bad-signature": header(try fixture.token(alice, forged: true)),
            "unknown-key": ["Authorization": "Bearer \(try fixture.token(alice, keyID: "k9"))"],
            "wrong-issuer": header(try fixture.token(alice, issuer: "mallory")),
            "wrong-audience": header(try fixture.token(alice, audience: "billing")),
            "tenant-mismatch": header(try fixture.token(alice, tenant: "fabrikam.com")),
            "blocked": header(try fixture.token(dave)),
        ]
        try await fixture.withApplication { app in
            for (name, headers) in requests.sorted(by: { $0.key < $1.key }) {
                try await app.testing().test(.GET, "whoami", headers: headers) { pinned.expect($0, is: name) }
            }
        }
        #expect(fixture.handlerRuns.value == 0)
    }

    @Test("a full replay cache: the pinned 503 replay-cache-full with Retry-After")
    func replayCacheFull() async throws {
        let pinned = try PinnedDocuments()
        let fixture = try Fixture(replayCacheCapacity: 1)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: header(try fixture.token(carol))) { response in
                #expect(response.status == .ok)
            }
            try await app.testing().test(.GET, "whoami", headers: header(try fixture.token(alice))) {
                pinned.expect($0, is: "replay-cache-full")
            }
        }
    }

    @Test("policy-unavailable, the refusal only this middleware answers: the neutral document, byte for byte")
    func policyUnavailable() async throws {
        let fixture = try Fixture(policySource: LatePolicySource())
        let refusal = try #require(fixture.policies.refusal(of: .create, to: alice))
        let expected = IdentityHTTPProblem.policyUnavailable(refusal, account: alice)
        try await fixture.withApplication { app in
            try await app.testing().test(.GET, "whoami", headers: header(try fixture.token(alice))) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.body.string == String(decoding: expected.json, as: UTF8.self))
                #expect(response.headers.first(name: .retryAfter) == "1")
                #expect(response.headers.first(name: .contentType) == IdentityHTTPProblem.contentType)
            }
        }
    }
}
