import Foundation
import Testing

/// `identity-harness policy check DIR`, run as the operators' CI runs it: the built executable.
@Suite("identity-harness policy check: lints a policy directory with the runtime's parser")
struct PolicyCheckCommandTests {
    /// A fresh directory holding `documents` (name → text).
    static func directory(_ documents: [String: String]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("policy-check-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        for (name, text) in documents {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path).appendingPathComponent(name))
        }
        return path
    }

    @Test("a clean directory: exit 0 and a summary")
    func clean() throws {
        let path = try Self.directory([
            "contoso.json": #"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": true}"#,
            "alice.json": #"{"formatVersion": 1, "account": "alice@contoso.com"}"#,
        ])
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (status, output) = try HarnessSelfCheckTests.runHarness(["policy", "check", path])
        #expect(status == 0, "\(output)")
        #expect(output.contains("2 documents, no errors"), "\(output)")
    }

    @Test("one line per error with file, line, column and key; a summary of what is refused; exit 1")
    func errors() throws {
        let path = try Self.directory([
            "contoso.json": "{\n  \"formatVersion\": 1,\n  \"tenant\": \"contoso.com\",\n  \"fileEncryptionRequired\": \"yes\"\n}",
            "broken.json": "{ not json",
            "good.json": #"{"formatVersion": 1, "account": "bob@fabrikam.com"}"#,
        ])
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (status, output) = try HarnessSelfCheckTests.runHarness(["policy", "check", path])
        #expect(status == 1, "\(output)")
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines.contains(path + "/contoso.json:4:29: \"fileEncryptionRequired\": must be a boolean, found string"), "\(output)")
        #expect(lines.contains { $0.hasPrefix(path + "/broken.json:1:3: not valid JSON") }, "\(output)")
        #expect(output.contains("3 documents, 2 errors"), "\(output)")
        #expect(output.contains("refused until fixed: every account of tenant contoso.com"), "\(output)")
        #expect(output.contains("every account without a good document of its own"), "\(output)")
    }

    @Test("a directory that cannot be read: exit 2; a bad command line: exit 64")
    func unreadableAndUsage() throws {
        let missing = try HarnessSelfCheckTests.runHarness(["policy", "check", "/nonexistent/\(UUID().uuidString)"])
        #expect(missing.status == 2, "\(missing.output)")
        #expect(missing.output.contains("cannot be read"))
        for arguments in [["policy"], ["policy", "lint", "x"], ["policy", "check"], ["policy", "check", "a", "b"]] {
            let (status, output) = try HarnessSelfCheckTests.runHarness(arguments)
            #expect(status == 64, "\(arguments): \(output)")
            #expect(output.contains("policy"))
        }
    }
}
