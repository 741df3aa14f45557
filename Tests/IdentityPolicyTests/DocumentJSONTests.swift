import Foundation
@testable import IdentityPolicy
import Testing

/// The documents people write (policy documents, the runtime settings) go through the package's one strict
/// JSON reader: its rules apply to them, and the values come out exactly as written.
@Suite("Policy documents and settings: the strict JSON reader")
struct DocumentJSONTests {
    @Test("a document's app configuration reads as the AppConfigurationValue written")
    func appConfigurationAsWritten() throws {
        let value: AppConfigurationValue = .object(["retention": .number(30)])
        let policy = try PolicyDocument(
            json: Data(#"{"formatVersion": 1, "account": "alice@contoso.com", "appConfiguration": {"retention": 30}}"#.utf8),
            path: "alice.json")
        #expect(AppConfigurationValue.object(policy.policy.appConfiguration) == value)
    }

    func parsed(_ text: String) throws(JSONReadError) -> [String: AppConfigurationValue] {
        try AppConfigurationValue.parseObject(Data(text.utf8))
    }

    func isMalformed(_ text: String) -> Bool {
        do {
            _ = try parsed(text)
            return false
        } catch {
            if case .malformed = error { return true }
            return false
        }
    }

    @Test("values come out as written: booleans, numbers of every form, strings, arrays, objects, null")
    func values() throws {
        let members = try parsed(#"{"b": true, "f": false, "i": 3, "d": -1.5e2, "s": "x\u00e9\n", "a": [1, "1", true, null, []], "o": {"k": {}}, "n": null}"#)
        #expect(members == [
            "b": .bool(true), "f": .bool(false), "i": .number(3), "d": .number(-150), "s": .string("x\u{e9}\n"),
            "a": .array([.number(1), .string("1"), .bool(true), .null, .array([])]), "o": .object(["k": .object([:])]),
            "n": .null,
        ])
    }

    @Test("a non-object is notAnObject with its type", arguments: [("[]", "array"), ("1", "number"), ("\"s\"", "string"), ("null", "null"), ("true", "boolean")])
    func notAnObject(text: String, found: String) {
        #expect {
            _ = try parsed(text)
        } throws: { error in
            guard case let .notAnObject(type) = error as? JSONReadError else { return false }
            return type == found
        }
    }

    @Test("refused as malformed: duplicate names, bad numbers, bad strings, bad syntax", arguments: [
        #"{"accountBlocked": true, "accountBlocked": false}"#, #"{"o": {"a": 1, "a": 1}}"#,
        #"{"n": 1e400}"#, #"{"n": 01}"#, #"{"n": 1.}"#, #"{"n": +1}"#, #"{"n": NaN}"#,
        #"{"s": "\ud800"}"#, "{\"s\": \"\t\"}", #"{"s": "\x"}"#,
        #"{"a": 1,,}"#, #"{,}"#, #"{"a": [,]}"#, #"{"a": [1,,]}"#, #"{"a": 1} x"#, "{\"a\": tru}", "",
    ])
    func malformed(text: String) {
        #expect(isMalformed(text))
    }

    @Test("invalid UTF-8 in a string is malformed")
    func invalidUTF8() {
        #expect(throws: JSONReadError.self) { try AppConfigurationValue.parseObject(Data([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D])) }
    }

    @Test("nesting: 512 levels are read, 513 are malformed")
    func depth() throws {
        func nested(_ levels: Int) -> String {
            "{\"a\": " + String(repeating: "[", count: levels - 1) + String(repeating: "]", count: levels - 1) + "}"
        }
        #expect(try parsed(nested(512))["a"] != nil)
        #expect(isMalformed(nested(513)))
    }

    @Test("a trailing comma after the last member or element is skipped, as before")
    func trailingCommas() throws {
        #expect(try parsed(#"{"a": [1, 2, ], "o": {"b": true ,} ,}"#) == ["a": .array([.number(1), .number(2)]), "o": .object(["b": .bool(true)])])
    }

    @Test("a UTF-8 byte-order mark is skipped, as before")
    func byteOrderMark() throws {
        #expect(try AppConfigurationValue.parseObject(Data([0xEF, 0xBB, 0xBF] + Array(#"{"a": 1}"#.utf8))) == ["a": .number(1)])
    }

    @Test("a duplicate key in a policy document or the settings is malformedJSON, never the first or the last value")
    func duplicatesThroughPublicAPI() {
        #expect {
            try PolicyDocument(json: Data(#"{"formatVersion": 1, "account": "a@b.c", "accountBlocked": true, "accountBlocked": false}"#.utf8), path: "/p.json")
        } throws: { error in
            guard case .malformedJSON = error as? PolicyDocumentError else { return false }
            return true
        }
        #expect {
            try RuntimeSettings(json: Data(#"{"multiIdentity": true, "multiIdentity": false}"#.utf8))
        } throws: { error in
            guard case .malformedJSON = error as? RuntimeSettingsError else { return false }
            return true
        }
    }
}
