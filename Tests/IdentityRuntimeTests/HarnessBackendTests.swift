import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The Ed25519 backend chosen at run time, seen from outside the process, as a user meets it: `identity-harness`
/// with `IDENTITY_SODIUM=off` (libcrypto forced) and without it (libsodium when the machine has
/// `libsodium.so.23`). The bench names the backend that ran and reports the `assertion-verify-fresh` figures
/// for it; the verifier gives the same answers on the same tokens either way.
@Suite("identity-harness: the Ed25519 backend chosen at run time, named and measured, with the same answers")
struct HarnessBackendTests {
    /// Whether this machine has a libsodium the harness will load (the names it looks for, in order).
    static var systemHasLibsodium: Bool {
        #if os(Linux)
        for name in ["libsodium.so.23", "libsodium.so"] {
            // The handle is never closed: the library stays mapped for the test process, as in the harness.
            if dlopen(name, RTLD_NOW | RTLD_LOCAL) != nil { return true }
        }
        #endif
        return false
    }

    /// The bench of one pair in one round at the smallest scale (a debug build: the figures mean nothing, the
    /// test checks they are there).
    static func benchFresh(sodium: String?) throws -> String {
        let (status, output) = try HarnessSelfCheckTests.runHarness(
            ["bench", "--only", "assertion-verify-fresh", "--rounds", "1", "--scale", "0.001"],
            environment: ["IDENTITY_SODIUM": sodium])
        #expect(status == 0, "\(output)")
        return output
    }

    /// The pair's row, `| title | raw | peer | ours | ...`: the three figures, each a positive number.
    static func freshRow(_ output: String, backend: String) -> [Double]? {
        let title = "verify a fresh token: \(backend) (ours) against libcrypto only (peer)"
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("| \(title) |") }) else { return nil }
        let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        guard cells.count >= 4 else { return nil }
        let figures = cells[1...3].compactMap(Double.init)
        return figures.count == 3 && figures.allSatisfy({ $0 > 0 && $0.isFinite }) ? figures : nil
    }

    @Test("IDENTITY_SODIUM=off: the bench says libcrypto and reports the fresh-token pair for it", .timeLimit(.minutes(5)))
    func benchOnLibcrypto() throws {
        let output = try Self.benchFresh(sodium: "off")
        #expect(output.contains("Ed25519 verification: libcrypto (libsodium not used: IDENTITY_SODIUM=off)"), "\(output)")
        #expect(Self.freshRow(output, backend: "libcrypto") != nil, "\(output)")
        #expect(!output.contains("libsodium (libsodium.so"), "\(output)")
    }

    @Test("without IDENTITY_SODIUM: the bench says libsodium when the machine has it, libcrypto otherwise",
          .timeLimit(.minutes(5)))
    func benchAutomatic() throws {
        let output = try Self.benchFresh(sodium: nil)
        #if os(Linux)
        if Self.systemHasLibsodium {
            #expect(output.contains("Ed25519 verification: libsodium (libsodium.so"), "\(output)")
            #expect(output.contains(", loaded at run time)"), "\(output)")
            #expect(Self.freshRow(output, backend: "libsodium") != nil, "\(output)")
        } else {
            #expect(output.contains("Ed25519 verification: libcrypto (libsodium not used: not found"), "\(output)")
            #expect(Self.freshRow(output, backend: "libcrypto") != nil, "\(output)")
        }
        #endif
    }

    @Test("the verifier accepts and refuses the same tokens with IDENTITY_SODIUM=off as without it", .timeLimit(.minutes(5)))
    func sameAnswers() throws {
        let keys = try HarnessSelfCheckTests.runHarness(["assertion", "keygen"])
        try #require(keys.status == 0, "\(keys.output)")
        func value(_ name: String, in output: String) throws -> String {
            let line = try #require(output.split(separator: "\n").first { $0.hasPrefix("\(name) ") })
            return String(line.dropFirst(name.count + 1))
        }
        let privateKey = try value("private", in: keys.output)
        let publicKey = try value("public", in: keys.output)
        let other = try value("private", in: try HarnessSelfCheckTests.runHarness(["assertion", "keygen"]).output)

        func sign(_ key: String, _ account: String) throws -> String {
            let signed = try HarnessSelfCheckTests.runHarness(
                ["assertion", "sign", "--private-key", key, "--kid", "k1", "--issuer", "frontend", "--audience", "documents",
                 "--account", account, "--tenant", "contoso.com"])
            try #require(signed.status == 0, "\(signed.output)")
            return signed.output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let alice = try sign(privateKey, "alice@contoso.com")
        let bob = try sign(privateKey, "bob@contoso.com")
        // One character of the signature changed, well inside it (no padding bits): a different signature.
        var characters = Array(try sign(privateKey, "carol@contoso.com"))
        let index = try #require(characters.lastIndex(of: ".")) + 20
        characters[index] = characters[index] == "A" ? "B" : "A"
        let tampered = String(characters)
        let foreign = try sign(other, "mallory@contoso.com")
        let input = [alice, tampered, bob, foreign].joined(separator: "\n") + "\n"

        let arguments = ["assertion", "verify", "--public-key", publicKey, "--kid", "k1", "--issuer", "frontend",
                         "--audience", "documents"]
        let automatic = try HarnessSelfCheckTests.runHarness(arguments, environment: ["IDENTITY_SODIUM": nil], input: input)
        let libcrypto = try HarnessSelfCheckTests.runHarness(arguments, environment: ["IDENTITY_SODIUM": "off"], input: input)
        #expect(automatic.status == 0 && libcrypto.status == 0, "\(automatic.output)\n\(libcrypto.output)")
        let lines = libcrypto.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(libcrypto.output)")
        if lines.count == 4 {
            #expect(lines[0] == #"accepted "alice@contoso.com" "contoso.com""#)
            #expect(lines[1].hasPrefix("refused "))
            #expect(lines[2] == #"accepted "bob@contoso.com" "contoso.com""#)
            #expect(lines[3].hasPrefix("refused "))
        }
        #expect(automatic.output == libcrypto.output)
    }
}
