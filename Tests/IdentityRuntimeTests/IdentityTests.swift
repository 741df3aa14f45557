import Foundation
import Testing
@testable import IdentityRuntime

@Suite("Identity: folding, unmanaged, validation")
struct IdentityTests {
    @Test("case-insensitive with full Unicode folding", arguments: [
        ("USER@CONTOSO.COM", "user@contoso.com"),
        ("Straße@contoso.com", "STRASSE@CONTOSO.COM"),
        ("straße@contoso.com", "strasse@contoso.com"),
        ("STRAẞE@contoso.com", "strasse@contoso.com"),
        ("KELVIN@contoso.com", "\u{212A}elvin@contoso.com"),
        ("ΣΊΣΥΦΟΣ@contoso.com", "σίσυφος@contoso.com"),
        ("ﬁnance@contoso.com", "FINANCE@contoso.com"),
        ("ǅemal@contoso.com", "ǆemal@contoso.com"),
        ("Ꮳhris@contoso.com", "ꮳhris@contoso.com"),
        ("İstanbul@contoso.com", "i\u{307}stanbul@contoso.com"),
        ("\u{1C80}@contoso.com", "\u{432}@contoso.com"),
        ("ſam@contoso.com", "SAM@contoso.com"),
        ("e\u{301}lise@contoso.com", "\u{E9}LISE@contoso.com"),
    ])
    func folding(lhs: String, rhs: String) {
        let a = Identity(lhs)
        let b = Identity(rhs)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(Set([a, b]).count == 1)
    }

    @Test("ASCII scalars among non-ASCII ones fold as ASCII lower case does, for every ASCII scalar")
    func asciiFastPathInMixedNames() {
        for value in UInt8(0)...UInt8(0x7F) {
            let scalar = String(Unicode.Scalar(value))
            #expect(Identity.fold("é" + scalar + "ß") == "é" + scalar.lowercased() + "ss", "scalar \(value)")
        }
    }

    @Test("different accounts stay different", arguments: [
        ("alice@contoso.com", "alice@contoso.org"),
        ("alice@contoso.com", "alíce@contoso.com"),
        ("i@contoso.com", "ı@contoso.com"),
        ("", "a"),
    ])
    func distinct(lhs: String, rhs: String) {
        #expect(Identity(lhs) != Identity(rhs))
    }

    @Test("the name keeps the spelling it was given")
    func nameKeepsSpelling() {
        let identity = Identity("Alice@Contoso.com")
        #expect(identity.name == "Alice@Contoso.com")
        #expect(identity.description == "Alice@Contoso.com")
        #expect(identity.foldedName == "alice@contoso.com")
    }

    @Test("unmanaged is the empty name, a value distinct from nil")
    func unmanaged() {
        #expect(Identity.unmanaged.name == "")
        #expect(Identity.unmanaged.isUnmanaged)
        #expect(Identity("") == .unmanaged)
        #expect(!Identity("a@b.c").isUnmanaged)
        let slot: Identity? = .unmanaged
        #expect(slot != nil)
        let literal: Identity = ""
        #expect(literal.isUnmanaged)
    }

    @Test("init(_:) trims surrounding white space and never fails", arguments: [
        (" alice@contoso.com", "alice@contoso.com"),
        ("alice@contoso.com\n", "alice@contoso.com"),
        ("\t\u{3000}alice@contoso.com \r\n", "alice@contoso.com"),
        ("   ", ""),
    ])
    func lenientTrimming(raw: String, expected: String) {
        let identity = Identity(raw)
        #expect(identity.name == expected)
        #expect(identity == Identity(expected))
    }

    @Test("trimming's printable-ASCII fast path trims what the Unicode white-space rule trims, for every ASCII byte at either end")
    func trimmingASCIIFastPathAgrees() {
        func reference(_ name: String) -> String {
            let scalars = Array(name.unicodeScalars)
            guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
                  let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
            var kept = String.UnicodeScalarView()
            kept.append(contentsOf: scalars[first...last])
            return String(kept)
        }
        for byte in UInt8(0)...0x7F {
            let character = String(UnicodeScalar(byte))
            for name in [character, character + "x", "x" + character, character + "x" + character, "\u{3000}x" + character] {
                #expect(Identity.trimmingSurroundingWhitespace(name) == reference(name), "byte 0x\(String(byte, radix: 16))")
            }
        }
    }

    @Test("init(_:) keeps control characters and absurd lengths rather than losing data")
    func lenientKeepsEverythingElse() {
        let long = String(repeating: "a", count: 100_000)
        #expect(Identity(long).name.count == 100_000)
        let longUnicode = String(repeating: "Straße ", count: 50_000) + "x"
        #expect(Identity(longUnicode) == Identity(longUnicode.uppercased()))
        #expect(Identity("a\u{0}b").name == "a\u{0}b")
    }

    @Test("init(validating:) accepts ordinary names and the empty name", arguments: [
        "alice@contoso.com", "ALICE@CONTOSO.COM", "Straße@contoso.de", "用户@例子.公司", "",
    ])
    func validatingAccepts(name: String) throws {
        let identity = try Identity(validating: name)
        #expect(identity.name == name)
        #expect(identity.isUnmanaged == name.isEmpty)
    }

    @Test("init(validating:) rejects surrounding white space", arguments: [
        " alice@contoso.com", "alice@contoso.com ", "alice@contoso.com\n", "\u{3000}alice@contoso.com", " ",
    ])
    func validatingRejectsWhitespace(name: String) {
        #expect(throws: IdentityValidationError.surroundingWhitespace) {
            try Identity(validating: name)
        }
    }

    @Test("init(validating:) rejects control and invisible characters with their position", arguments: [
        ("al\u{0}ice", UInt32(0), 2),
        ("alice\u{7}@x", UInt32(7), 5),
        ("a\u{200B}b", UInt32(0x200B), 1),
        ("a\u{202E}b", UInt32(0x202E), 1),
        ("a\u{2028}b", UInt32(0x2028), 1),
        ("a\u{E000}b", UInt32(0xE000), 1),
    ])
    func validatingRejectsControl(name: String, scalar: UInt32, offset: Int) {
        #expect(throws: IdentityValidationError.forbiddenCharacter(scalar: scalar, offset: offset)) {
            try Identity(validating: name)
        }
    }

    @Test("init(validating:) gives the same answer on its printable-ASCII fast path as the general rules")
    func validatingASCIIFastPathAgrees() {
        /// The general rules, applied to every name.
        func reference(_ name: String) -> Result<String, IdentityValidationError> {
            if Identity.trimmingSurroundingWhitespace(name) != name { return .failure(.surroundingWhitespace) }
            for (offset, scalar) in name.unicodeScalars.enumerated() where Identity.isForbidden(scalar) {
                return .failure(.forbiddenCharacter(scalar: scalar.value, offset: offset))
            }
            return .success(name)
        }
        for byte in UInt8(0)...0x7F {
            let character = String(UnicodeScalar(byte))
            for name in [character, character + "x", "x" + character + "y", "x" + character, character + character] {
                let actual = Result { () throws(IdentityValidationError) -> String in try Identity(validating: name).name }
                #expect(actual == reference(name), "byte 0x\(String(byte, radix: 16)) in \(String(reflecting: name))")
            }
        }
    }

    @Test("init(validating:) rejects absurd lengths, counting UTF-8 bytes")
    func validatingRejectsLength() throws {
        let atLimit = String(repeating: "a", count: Identity.maximumUTF8Length)
        #expect(try Identity(validating: atLimit).name == atLimit)
        let over = String(repeating: "é", count: Identity.maximumUTF8Length / 2 + 1)
        #expect(throws: IdentityValidationError.tooLong(utf8Length: over.utf8.count, limit: Identity.maximumUTF8Length)) {
            try Identity(validating: over)
        }
    }

    @Test("errors describe themselves")
    func errorDescriptions() {
        #expect(IdentityValidationError.forbiddenCharacter(scalar: 7, offset: 3).description.contains("U+0007"))
        #expect(IdentityValidationError.tooLong(utf8Length: 2000, limit: 1024).description.contains("2000"))
    }

    @Test("Codable round-trips and rejects invalid stored names")
    func codable() throws {
        let data = try JSONEncoder().encode([Identity("Alice@contoso.com"), .unmanaged])
        #expect(String(decoding: data, as: UTF8.self) == #"["Alice@contoso.com",""]"#)
        let decoded = try JSONDecoder().decode([Identity].self, from: data)
        #expect(decoded == [Identity("alice@contoso.com"), .unmanaged])
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([Identity].self, from: Data(#"[" padded "]"#.utf8))
        }
    }
}
