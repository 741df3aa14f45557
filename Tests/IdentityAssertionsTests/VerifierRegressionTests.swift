import Foundation
@testable import IdentityAssertions
import Testing

@Suite("Verifier regressions found by an adversarial review")
struct VerifierRegressionTests {
    @Test("V1 floats, nested nulls, huge exp, lookalike/format tid, exp < iat")
    func oddClaims() throws {
        let f = try AssertionFixture()
        let now = Int64(f.clock.date.timeIntervalSince1970)
        let header = #"{"alg":"EdDSA","kid":"k1"}"#
        func claims(_ extra: String, exp: String? = nil, iat: String? = nil, aud: String = #""documents""#) -> String {
            #"{"aud":\#(aud),"exp":\#(exp ?? "\(now + 300)"),"iat":\#(iat ?? "\(now)"),"iss":"frontend","jti":"\#(UUID().uuidString)","sub":"alice@contoso.com"\#(extra)}"#
        }
        let cases: [(String, String, Int)] = [
            ("nbf float", claims(#","nbf":1800000000.0"#), 1),
            ("nbf exp", claims(#","nbf":18e8"#), 1),
            ("nbf -0", claims(#","nbf":-0"#), 0),
            ("exp float", claims("", exp: "\(now + 300).0"), 1),
            ("aud [null]", claims("", aud: "[null]"), 1),
            ("aud [null, documents]", claims("", aud: #"[null,"documents"]"#), 1),
            ("aud []", claims("", aud: "[]"), 8),
            ("exp Int64.max", claims("", exp: "\(Int64.max)"), 13),
            ("exp < iat", claims("", exp: "\(now + 10)", iat: "\(now + 20)"), 1),
            ("iat Int64.min", claims("", iat: "\(Int64.min)"), 13),
            ("tid zero width", claims(#","tid":"contoso.com\u200b""#), 14),
            ("tid bidi", claims(#","tid":"\u202econtoso.com""#), 14),
            ("tid empty", claims(#","tid":"""#), 14),
            ("tid object", claims(#","tid":{}"#), 1),
            ("sub NUL", #"{"aud":"documents","exp":\#(now + 300),"iat":\#(now),"iss":"frontend","jti":"x1","sub":"alice\u0000@contoso.com"}"#, 12),
        ]
        for (name, c, expected) in cases {
            let got = refusalCode(f.verifier, try f.raw(header: header, claims: c))
            #expect(got == (expected == 0 ? nil : expected), "\(name): got \(String(describing: got))")
        }
    }
}
