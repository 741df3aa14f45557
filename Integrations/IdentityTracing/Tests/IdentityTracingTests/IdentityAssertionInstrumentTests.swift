import Foundation
import IdentityAssertions
import IdentityRuntime
import IdentityTracing
import Instrumentation
import ServiceContextModule
import Testing

@Suite("IdentityAssertionInstrument")
struct IdentityAssertionInstrumentTests {
    let key: AssertionSigningKey
    let signer: IdentityAssertionSigner
    let client: IdentityAssertionInstrument

    init() throws {
        key = try AssertionSigningKey()
        signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "frontend")
        client = IdentityAssertionInstrument(signer: signer, audience: "documents")
    }

    /// A receiving instrument with its own verifier (and so its own replay cache).
    func server() -> IdentityAssertionInstrument {
        IdentityAssertionInstrument(verifier: IdentityAssertionVerifier(
            keys: ["k1": key.publicKey], issuers: ["frontend"], audience: "documents"))
    }

    func receive(_ carrier: [String: String], with server: IdentityAssertionInstrument) -> ServiceContext {
        var context = ServiceContext.topLevel
        server.extract(carrier, into: &context, using: DictionaryExtractor())
        return context
    }

    @Test("round trip through a [String: String] carrier: the context identity")
    func roundTripFromContext() {
        var outgoing = ServiceContext.topLevel
        outgoing.identity = "alice@contoso.com"
        var carrier: [String: String] = [:]
        client.inject(outgoing, into: &carrier, using: DictionaryInjector())
        #expect(carrier["x-identity-assertion"]?.split(separator: ".").count == 3)

        let incoming = receive(carrier, with: server())
        #expect(incoming.identity == "alice@contoso.com")
        #expect(incoming.identityAssertion?.issuer == "frontend")
        #expect(incoming.identityAssertion?.audience == "documents")
        #expect(incoming.identityAssertionError == nil)
        IdentityContext.withServiceContext(incoming) {
            #expect(IdentityContext.currentThreadIdentity == "alice@contoso.com")
        }
    }

    @Test("round trip: with no context identity, the caller's thread identity (also in a task) is injected")
    func roundTripFromThreadIdentity() async {
        let carrier = await IdentityContext.withThreadIdentity("bob@fabrikam.com") {
            await Task {
                var carrier: [String: String] = [:]
                client.inject(ServiceContext.current ?? .topLevel, into: &carrier, using: DictionaryInjector())
                return carrier
            }.value
        }
        #expect(receive(carrier, with: server()).identity == "bob@fabrikam.com")
    }

    @Test("the tenant claim comes from the tenant closure")
    func tenantClaim() {
        let client = IdentityAssertionInstrument(signer: signer, audience: "documents", tenant: { _ in "tenant-7" })
        var carrier: [String: String] = [:]
        IdentityContext.withThreadIdentity("carol@contoso.com") {
            client.inject(.topLevel, into: &carrier, using: DictionaryInjector())
        }
        #expect(receive(carrier, with: server()).identityAssertion?.tenant == "tenant-7")
    }

    @Test("no identity, or the unmanaged one, injects nothing; a missing header gives no identity and no error")
    func nothingToInject() {
        var carrier: [String: String] = [:]
        client.inject(.topLevel, into: &carrier, using: DictionaryInjector())
        IdentityContext.withThreadIdentity(.unmanaged) {
            client.inject(.topLevel, into: &carrier, using: DictionaryInjector())
        }
        #expect(carrier.isEmpty)
        let incoming = receive(carrier, with: server())
        #expect(incoming.identity == nil)
        #expect(incoming.identityAssertionError == nil)
    }

    @Test("an identity already in the incoming context is removed unless the carrier proves one")
    func extractClearsPriorIdentity() {
        var context = ServiceContext.topLevel
        context.identity = "mallory@contoso.com"
        server().extract(["x-identity-assertion": "not a token"], into: &context, using: DictionaryExtractor())
        #expect(context.identity == nil)
        #expect(context.identityAssertionError?.code == 1)
    }

    static let tamperings: [(String, @Sendable (String) -> String)] = [
        ("claims byte", { token in
            var parts = token.split(separator: ".").map(String.init)
            var claims = Array(parts[1])
            claims[5] = claims[5] == "A" ? "B" : "A"
            parts[1] = String(claims)
            return parts.joined(separator: ".")
        }),
        ("signature byte", { token in
            var parts = token.split(separator: ".").map(String.init)
            var signature = Array(parts[2])
            signature[3] = signature[3] == "A" ? "B" : "A"
            parts[2] = String(signature)
            return parts.joined(separator: ".")
        }),
        ("alg none, no signature", { token in
            let parts = token.split(separator: ".").map(String.init)
            let header = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
            return header + "." + parts[1] + "."
        }),
        ("truncated", { token in String(token.dropLast(10)) }),
    ]

    @Test("a tampered token gives no identity, and the error is observable", arguments: 0..<4)
    func tampered(_ index: Int) {
        let (_, tamper) = Self.tamperings[index]
        let token = tamper(try! signer.sign(account: "alice@contoso.com", audience: "documents"))
        let incoming = receive(["x-identity-assertion": token], with: server())
        #expect(incoming.identity == nil)
        #expect(incoming.identityAssertion == nil)
        #expect(incoming.identityAssertionError != nil)
    }

    @Test("an expired token gives no identity")
    func expired() throws {
        let token = try signer.sign(
            account: "alice@contoso.com", audience: "documents", lifetime: 60, now: Date().addingTimeInterval(-3_600))
        let incoming = receive(["x-identity-assertion": token], with: server())
        #expect(incoming.identity == nil)
        #expect(incoming.identityAssertionError?.code == 6)
    }

    @Test("a token for another audience gives no identity")
    func wrongAudience() {
        let client = IdentityAssertionInstrument(signer: signer, audience: "billing")
        var carrier: [String: String] = [:]
        IdentityContext.withThreadIdentity("alice@contoso.com") {
            client.inject(.topLevel, into: &carrier, using: DictionaryInjector())
        }
        let incoming = receive(carrier, with: server())
        #expect(incoming.identity == nil)
        #expect(incoming.identityAssertionError == .wrongAudience("billing"))
    }

    @Test("a token signed by a key the verifier does not hold gives no identity")
    func unknownSigner() throws {
        let stranger = IdentityAssertionInstrument(
            signer: IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "k1", issuer: "frontend"),
            audience: "documents")
        var carrier: [String: String] = [:]
        IdentityContext.withThreadIdentity("alice@contoso.com") {
            stranger.inject(.topLevel, into: &carrier, using: DictionaryInjector())
        }
        let incoming = receive(carrier, with: server())
        #expect(incoming.identity == nil)
        #expect(incoming.identityAssertionError == .badSignature)
    }

    @Test("a replayed carrier is refused the second time")
    func replay() {
        let server = server()
        var carrier: [String: String] = [:]
        IdentityContext.withThreadIdentity("alice@contoso.com") {
            client.inject(.topLevel, into: &carrier, using: DictionaryInjector())
        }
        #expect(receive(carrier, with: server).identity == "alice@contoso.com")
        let again = receive(carrier, with: server)
        #expect(again.identity == nil)
        guard case .replayed = again.identityAssertionError else {
            Issue.record("expected a replay error, got \(String(describing: again.identityAssertionError))")
            return
        }
    }

    @Test("a custom header name, read case-insensitively by the extractor")
    func customHeader() {
        let client = IdentityAssertionInstrument(signer: signer, audience: "documents", headerName: "x-on-behalf-of")
        let server = IdentityAssertionInstrument(
            verifier: IdentityAssertionVerifier(keys: ["k1": key.publicKey], issuers: ["frontend"], audience: "documents"),
            headerName: "x-on-behalf-of")
        var carrier: [String: String] = [:]
        ServiceContext.withIdentity("dave@contoso.com") {
            client.inject(ServiceContext.currentWithIdentity, into: &carrier, using: DictionaryInjector())
        }
        #expect(carrier["x-identity-assertion"] == nil)
        let upper = Dictionary(uniqueKeysWithValues: carrier.map { ($0.key.uppercased(), $0.value) })
        #expect(receive(upper, with: server).identity == "dave@contoso.com")
    }

    @Test("many concurrent requests each verify as their own identity")
    func concurrent() async {
        let server = server()
        let client = client
        let results = await withTaskGroup(of: Bool.self, returning: [Bool].self) { group in
            for index in 0..<64 {
                group.addTask {
                    let account = Identity("user\(index)@tenant\(index % 8).example")
                    let carrier = await ServiceContext.withIdentity(account) {
                        await Task.yield()
                        var carrier: [String: String] = [:]
                        client.inject(ServiceContext.currentWithIdentity, into: &carrier, using: DictionaryInjector())
                        return carrier
                    }
                    var context = ServiceContext.topLevel
                    server.extract(carrier, into: &context, using: DictionaryExtractor())
                    return await IdentityContext.withServiceContext(context) {
                        await Task.yield()
                        return IdentityContext.currentThreadIdentity == account
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 64)
        #expect(results.allSatisfy { $0 })
    }
}
