import IdentityAssertions
import Testing

@testable import IdentityJWKS

@Suite("RemoteKeySet's transport rule: https only, plain http to loopback only when allowed")
struct JWKSAddressTests {
    @Test("https is accepted; plain http to another host is refused even when loopback http is allowed", arguments: [false, true])
    func httpsOnly(allowsLoopbackHTTP: Bool) throws {
        let configuration = RemoteKeySet.Configuration(allowsLoopbackHTTP: allowsLoopbackHTTP)
        _ = try RemoteKeySet(url: "https://gateway.internal/.well-known/jwks.json", verifier: makeVerifier(), configuration: configuration)
        for url in ["http://gateway.internal/jwks.json", "http://10.0.0.1/jwks.json", "http://128.0.0.1/jwks.json",
                    "http://127.0.0.1.example.com/jwks.json", "http://localhost.example.com/jwks.json", "http://[::2]/jwks.json",
                    // Not addresses to the HTTP client (leading zeros, other notations): it would ask DNS.
                    "http://127.0.0.099/jwks.json", "http://127.0.0.01/jwks.json", "http://0x7f.0.0.1/jwks.json",
                    "http://2130706433/jwks.json", "http://127.1/jwks.json"] {
            #expect(throws: JWKSFetchError.insecureURL(url)) {
                _ = try RemoteKeySet(url: url, verifier: makeVerifier(), configuration: configuration)
            }
        }
    }

    @Test("plain http to a loopback host only with allowsLoopbackHTTP")
    func loopbackNeedsOptIn() throws {
        for url in ["http://127.0.0.1:8080/jwks.json", "http://localhost/jwks.json", "http://127.1.2.3/jwks.json", "http://[::1]:9/jwks.json"] {
            #expect(throws: JWKSFetchError.insecureURL(url)) { _ = try RemoteKeySet(url: url, verifier: makeVerifier()) }
            _ = try RemoteKeySet(url: url, verifier: makeVerifier(), configuration: .init(allowsLoopbackHTTP: true))
        }
    }

    @Test("what is not an absolute http(s) URL with a host is refused as invalid")
    func invalidAddresses() {
        for url in ["", "jwks.json", "/.well-known/jwks.json", "ftp://gateway.internal/jwks.json", "file:///etc/jwks.json",
                    "https://", "unix:///tmp/socket", "gateway.internal/jwks.json"] {
            #expect(throws: JWKSFetchError.invalidURL(url)) {
                _ = try RemoteKeySet(url: url, verifier: makeVerifier(), configuration: .init(allowsLoopbackHTTP: true))
            }
        }
    }

    @Test("a refused address leaves the verifier's keys as they were")
    func refusalKeepsKeys() throws {
        let issuer = try TestIssuer(kid: "k1")
        let verifier = IdentityAssertionVerifier(
            keys: ["k1": issuer.signer.key.publicKey], issuers: ["gateway"], audience: "documents")
        #expect(throws: JWKSFetchError.self) { _ = try RemoteKeySet(url: "http://gateway.internal/jwks.json", verifier: verifier) }
        #expect(verifier.keyIDs == ["k1"])
    }

    @Test("a redirect through plain http is refused: every hop of the exchange must pass the rule")
    func redirectHops() {
        #expect(JWKSFetcher.refusedHop(["https://a.example/jwks.json", "https://b.example/jwks.json"], allowsLoopbackHTTP: false) == nil)
        #expect(JWKSFetcher.refusedHop(["https://a.example/jwks.json", "http://b.example/jwks.json"], allowsLoopbackHTTP: true)
            == .insecureURL("http://b.example/jwks.json"))
        #expect(JWKSFetcher.refusedHop(["http://127.0.0.1:1/jwks.json", "http://evil.example/jwks.json"], allowsLoopbackHTTP: true)
            == .insecureURL("http://evil.example/jwks.json"))
        #expect(JWKSFetcher.refusedHop(["https://a.example/jwks.json", "http://127.0.0.1/jwks.json"], allowsLoopbackHTTP: false)
            == .insecureURL("http://127.0.0.1/jwks.json"))
    }
}
