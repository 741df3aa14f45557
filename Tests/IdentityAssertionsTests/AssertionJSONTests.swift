import Foundation
@testable import IdentityAssertions
import IdentityJSON
import IdentityRuntime
import Testing

@Suite("Signed identity assertions: the strict one-pass JSON reader of header and claims")
struct AssertionJSONTests {
    func members(_ text: String) -> [String: StrictJSON.Value]? {
        try? StrictJSON.object(Array(text.utf8)).get()
    }

    @Test("strings, integers, string arrays, null and other values; white space around tokens")
    func values() throws {
        let object = try #require(members(#" { "s" : "a\"b\\c\/d\u00e9\ud83d\ude00\n" , "i":-42, "z":0, "big":9223372036854775807, "a":["x","y"], "n":null, "o":{"k":[1,true,false,1.5e3]}, "m":["x",1], "f":1.0 } "#))
        #expect(object["s"] == .string("a\"b\\c/d\u{e9}\u{1F600}\n"))
        #expect(object["i"] == .integer(-42))
        #expect(object["z"] == .integer(0))
        #expect(object["big"] == .integer(Int64.max))
        #expect(object["a"] == .strings(["x", "y"]))
        #expect(object["n"] == .null)
        #expect(object["o"] == .other)
        #expect(object["m"] == .other)
        #expect(object["f"] == .other)
        #expect(members("{}") == [:])
        #expect(members(#"{"e":[]}"#)?["e"] == .strings([]))
        #expect(members(#"{"over":9223372036854775808}"#)?["over"] == .other)
    }

    @Test("refused: duplicate names, bad syntax, bad strings, bad numbers, deep nesting, trailing text", arguments: [
        #"{"a":1,"a":1}"#, #"{"a":"x","b":2,"a":"y"}"#, #"{"a":{"b":1,"b":2}}"#,
        "", "[]", "null", "\"x\"", "{", #"{"a"}"#, #"{"a":}"#, #"{"a":1,}"#, #"{"a":1 "b":2}"#, #"{a:1}"#,
        #"{"a":1}x"#, #"{"a":1}{}"#, "\u{FEFF}{}", #"{"a":'x'}"#, #"{"a":tru}"#, #"{"a":nul}"#,
        #"{"a":"\x"}"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00\ud800"}"#, #"{"a":"\u12"}"#, "{\"a\":\"\u{01}\"}", "{\"a\":\"x\ny\"}",
        #"{"a":01}"#, #"{"a":-}"#, #"{"a":1.}"#, #"{"a":.5}"#, #"{"a":1e}"#, #"{"a":+1}"#, #"{"a":0x10}"#,
        String(repeating: #"{"a":"#, count: 20) + "1" + String(repeating: "}", count: 20),
    ])
    func refused(text: String) {
        #expect(members(text) == nil)
    }

    @Test("invalid UTF-8 inside a string is refused")
    func invalidUTF8() {
        for bytes: [UInt8] in [[0xC3], [0xFF], [0xED, 0xA0, 0x80], [0xC0, 0xAF]] {
            let text = Array(#"{"a":""#.utf8) + bytes + Array(#""}"#.utf8)
            #expect((try? StrictJSON.object(text).get()) == nil)
        }
    }

    @Test("the verifier refuses a duplicated claim or header member, and claims of the wrong type, even when signed")
    func verifierRefusesAmbiguity() throws {
        let f = try AssertionFixture()
        let now = Int64(f.clock.date.timeIntervalSince1970)
        let header = #"{"alg":"EdDSA","kid":"k1","typ":"JWT"}"#
        let base = #""aud":"documents","exp":\#(now + 300),"iat":\#(now),"iss":"frontend","jti":"\#(UUID().uuidString)""#
        let ambiguous = [
            (header, "{" + base + #","sub":"alice@contoso.com","sub":"mallory@contoso.com"}"#),
            (#"{"alg":"EdDSA","kid":"k1","kid":"k1"}"#, "{" + base + #","sub":"alice@contoso.com"}"#),
            (header, #"{"aud":"documents","exp":\#(now + 300).0,"iat":\#(now),"iss":"frontend","jti":"j1","sub":"alice@contoso.com"}"#),
            (header, #"{"aud":"documents","exp":"\#(now + 300)","iat":\#(now),"iss":"frontend","jti":"j2","sub":"alice@contoso.com"}"#),
            (header, #"{"aud":["documents",7],"exp":\#(now + 300),"iat":\#(now),"iss":"frontend","jti":"j3","sub":"alice@contoso.com"}"#),
            (header, #"{"aud":"documents","exp":\#(now + 300),"iat":\#(now),"iss":"frontend","jti":"j4","sub":"alice@contoso.com","tid":5}"#),
            (#"{"alg":"EdDSA","kid":7}"#, "{" + base + #","sub":"alice@contoso.com"}"#),
            // A JSON null is a member of the wrong type, never an absent one.
            (header, "{" + base + #","sub":"alice@contoso.com","nbf":null}"#),
            (header, "{" + base + #","sub":"alice@contoso.com","tid":null}"#),
            (#"{"alg":"EdDSA","kid":"k1","typ":null}"#, "{" + base + #","sub":"alice@contoso.com"}"#),
        ]
        for (header, claims) in ambiguous {
            #expect(throws: AssertionError.self) { try f.verifier.verify(try f.raw(header: header, claims: claims)) }
        }
        // The same claims once each, escapes and unknown claims included, verify.
        let escaped = "{" + base + #","sub":"alice\u0040contoso.com","tid":"contoso.com","extra":{"x":[1,2.5,null]}}"#
        let assertion = try f.verifier.verify(try f.raw(header: header, claims: escaped))
        #expect(assertion.account == "alice@contoso.com" && assertion.tenant == "contoso.com" && assertion.notBefore == nil)
        #expect(try f.verifier.verify(try f.raw(
            header: #"{"alg":"EdDSA","kid":"k1"}"#,
            claims: #"{"aud":["billing","documents"],"exp":\#(now + 300),"iat":\#(now),"iss":"frontend","jti":"many","sub":"bob@contoso.com"}"#)).account == "bob@contoso.com")
    }

    @Test("the writer: what it writes reads back member for member, here and in JSONSerialization; exactly the escapes JSON needs")
    func writer() throws {
        // Every control character, the two that must be escaped, the slash, and characters beyond ASCII.
        let awkward = String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }) + "\"\\/é😀\u{7F}"
        var generator = SystemRandomNumberGenerator()
        var samples = [awkward, "", "plain", "tenant.example/x"]
        for _ in 0..<500 {
            let scalars = (0..<Int.random(in: 0...24, using: &generator)).map { _ -> Character in
                let pick = [UInt32.random(in: 0...0x7F, using: &generator), UInt32.random(in: 0x80...0xD7FF, using: &generator),
                            UInt32.random(in: 0xE000...0x10FFFF, using: &generator)].randomElement(using: &generator)!
                return Character(Unicode.Scalar(pick) ?? "x")
            }
            samples.append(String(scalars))
        }
        for (index, text) in samples.enumerated() {
            let integer = Int64.random(in: Int64.min...Int64.max, using: &generator)
            let bytes = StrictJSON.objectBytes([("a", .string(text)), ("n", .integer(integer)), ("z", .integer(index == 0 ? Int64.min : 0))])
            let ours = try StrictJSON.object(bytes).get()
            #expect(ours["a"] == .string(text))
            #expect(ours["n"] == .integer(integer))
            let foundation = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
            #expect(foundation["a"] as? String == text)
        }
        #expect(String(decoding: StrictJSON.objectBytes([("k", .string(awkward))]), as: UTF8.self)
            == #"{"k":"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f\"\\/é😀"# + "\u{7F}" + #""}"#)
    }

    @Test("claims of a date JSON cannot hold as whole seconds are refused with a typed error, not a crash")
    func unwritableDate() throws {
        let signer = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "k1", issuer: "frontend")
        var assertion = IdentityAssertion(
            account: "alice@contoso.com", issuer: "frontend", audience: "documents", issuedAt: Date(), expiresAt: Date())
        assertion.expiresAt = Date(timeIntervalSince1970: 1e300)
        #expect { try signer.sign(assertion) } throws: { ($0 as? AssertionError)?.code == 17 }
        assertion.expiresAt = Date().addingTimeInterval(60)
        assertion.notBefore = Date(timeIntervalSince1970: -.infinity)
        #expect { try signer.sign(assertion) } throws: { ($0 as? AssertionError)?.code == 17 }
    }
}
