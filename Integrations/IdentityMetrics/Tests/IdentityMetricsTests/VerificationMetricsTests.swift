import Foundation
import IdentityAssertions
import IdentityMetrics
import IdentityRuntime
import MetricsTestKit
import Testing

@Suite("AssertionVerificationMetrics: verifications by outcome, reusable-cache hits")
struct VerificationMetricsTests {
    let key: AssertionSigningKey
    let signer: IdentityAssertionSigner

    init() throws {
        key = try AssertionSigningKey()
        signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "gateway")
    }

    func verifier(_ metrics: IdentityRuntimeMetrics, mode: IdentityAssertionVerifier.Mode) -> IdentityAssertionVerifier {
        IdentityAssertionVerifier(
            keys: ["k1": key.publicKey], issuers: ["gateway"], audience: "documents", mode: mode,
            observer: metrics.verificationObserver)
    }

    @Test("single-use: each verification counted once, refusals by their case")
    func singleUse() throws {
        let (test, metrics) = makeMetrics()
        let verifier = verifier(metrics, mode: .singleUse)
        var tokens: [String] = []
        for account in [alice, bob, carol] {
            let token = try signer.sign(account: account, tenant: "contoso.com", audience: "documents")
            tokens.append(token)
            _ = try verifier.verify(token)
        }
        let wrongAudience = try signer.sign(account: alice, audience: "audit")
        tokens.append(wrongAudience)
        // A signature changed in its middle (never the same token, and still canonical base64url).
        var tampered = Array(tokens[1])
        let middle = tampered.count - 20
        tampered[middle] = tampered[middle] == "A" ? "B" : "A"
        for token in [tokens[0], wrongAudience, "a.b.c", String(tampered)] {
            #expect(throws: AssertionError.self) { try verifier.verify(token) }
        }
        #expect(test.total(Names.tokenVerifications, [("outcome", "accepted")]) == 3)
        #expect(test.total(Names.tokenVerifications, [("outcome", "replayed")]) == 1)
        #expect(test.total(Names.tokenVerifications, [("outcome", "wrongAudience")]) == 1)
        #expect(test.total(Names.tokenVerifications, [("outcome", "malformed")]) == 1)
        #expect(test.total(Names.tokenVerifications, [("outcome", "badSignature")]) == 1)
        #expect(test.counterTotal(label: Names.tokenVerifications) == 7)
        #expect(test.total(Names.tokenCacheHits) == 0)
        test.expectNoDimension(containing: accounts.map(\.name) + tokens + tokens.flatMap { $0.split(separator: ".").map(String.init) })
    }

    @Test("reusable: the first use is a full verification, each later one a cache hit")
    func reusable() throws {
        let (test, metrics) = makeMetrics()
        let verifier = verifier(metrics, mode: .reusable)
        let token = try signer.sign(account: alice, audience: "documents")
        for _ in 0..<4 { _ = try verifier.verify(token) }
        let other = try signer.sign(account: bob, audience: "documents")
        _ = try verifier.verify(other)
        #expect(test.total(Names.tokenVerifications, [("outcome", "accepted")]) == 5)
        #expect(test.total(Names.tokenCacheHits) == 3)
        test.expectNoDimension(containing: accounts.map(\.name) + [token, other])
    }

    @Test("every refusal has an outcome of its own, without its associated values", arguments: [
        (AssertionError.malformed("claims: sub alice@contoso.com"), "malformed"),
        (.expired(at: Date(timeIntervalSince1970: 0)), "expired"),
        (.replayed(tokenID: "jti-123"), "replayed"),
        (.wrongIssuer("evil"), "wrongIssuer"),
        (.invalidAccount("alice@contoso.com"), "invalidAccount"),
    ])
    func outcomes(error: AssertionError, outcome: String) {
        #expect(AssertionVerificationMetrics.outcome(of: error) == outcome)
    }
}
