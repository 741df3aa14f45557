import Foundation
import Testing

/// The harness must catch a broken wrapper within seconds. Faults are process-wide in the harness, so it
/// runs as a child process (the `identity-harness` executable built next to this test bundle).
@Suite("identity-harness stress catches injected faults, and passes without them")
struct HarnessSelfCheckTests {
    static var harness: URL? {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [directory, directory.deletingLastPathComponent()].map {
            $0.appendingPathComponent("identity-harness")
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// Runs the harness and returns its exit status and output (standard output and error together).
    /// `environment`: variables set (a `nil` value removes one) over this process's own; `input`: its standard input.
    static func runHarness(
        _ arguments: [String], environment: [String: String?] = [:], input: String? = nil
    ) throws -> (status: Int32, output: String) {
        guard let harness else { throw HarnessMissing() }
        let process = Process()
        process.executableURL = harness
        process.arguments = arguments
        if !environment.isEmpty {
            var merged = ProcessInfo.processInfo.environment
            for (name, value) in environment { merged[name] = value }
            process.environment = merged
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let inputPipe = input.map { _ in Pipe() }
        if let inputPipe { process.standardInput = inputPipe }
        try process.run()
        if let input, let inputPipe {
            // Small inputs (a few tokens) fit the pipe's buffer: no deadlock against the output read below.
            try inputPipe.fileHandleForWriting.write(contentsOf: Data(input.utf8))
            try inputPipe.fileHandleForWriting.close()
        }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    struct HarnessMissing: Error, CustomStringConvertible {
        var description: String { "identity-harness was not built next to the test bundle" }
    }

    @Test("a clean run passes", .timeLimit(.minutes(5)))
    func cleanRun() throws {
        let (status, output) = try Self.runHarness(["stress", "--duration", "2", "--in-flight", "16", "--seed", "7"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("0 violations"))
    }

    @Test("each injected fault is caught", .timeLimit(.minutes(5)),
          arguments: ["capture-at-run", "skip-restore"])
    func faultIsCaught(fault: String) throws {
        let (status, output) = try Self.runHarness(
            ["stress", "--duration", "2", "--in-flight", "16", "--seed", "7", "--fault", fault])
        #expect(status == 1, "\(output)")
        #expect(output.contains("VIOLATIONS"))
    }
}

@Suite("identity-harness's command line: bad values are errors, --help lists everything")
struct HarnessCommandLineTests {
    @Test("a bad or missing value, an unknown flag or command: exit 64 naming it, never a default", arguments: [
        (["stress", "--seed", "x"], "--seed"), (["stress", "--duration", "-1"], "--duration"),
        (["stress", "--in-flight", "0"], "--in-flight"), (["stress", "--depth"], "--depth"),
        (["stress", "--frobnicate", "1"], "--frobnicate"), (["soak", "--identities", "many"], "--identities"),
        (["bench", "--rounds", "0"], "--rounds"), (["bench", "--scale", "nan"], "--scale"),
        (["bench", "--side", "theirs"], "--side"), (["verify", "--fast"], "verify"), (["frobnicate"], "frobnicate"),
        (["stress", "--isolation", "--faults", "slow-key-store,gremlins"], "--faults"),
    ])
    func badValues(arguments: [String], named: String) throws {
        let (status, output) = try HarnessSelfCheckTests.runHarness(arguments)
        #expect(status == 64, "\(output)")
        #expect(output.contains(named))
        #expect(output.contains("usage: identity-harness"))
    }

    @Test("assertion refuses unknown options and a bad lifetime")
    func assertionOptions() throws {
        let unknown = try HarnessSelfCheckTests.runHarness(["assertion", "verify", "--issuer", "i", "--audience", "a", "--nope", "1"])
        #expect(unknown.status != 0 && unknown.output.contains("--nope"))
        let lifetime = try HarnessSelfCheckTests.runHarness(["assertion", "sign", "--lifetime", "forever"])
        #expect(lifetime.status != 0 && lifetime.output.contains("--lifetime"))
    }

    @Test("--help, anywhere, lists every command and every flag", arguments: [["--help"], ["stress", "--help"], ["-h"]])
    func help(arguments: [String]) throws {
        let (status, output) = try HarnessSelfCheckTests.runHarness(arguments)
        #expect(status == 0)
        for word in ["verify", "stress", "soak", "assertion", "keygen", "jwks", "sign", "bench", "wipe-child",
                     "--seed", "--duration", "--identities", "--depth", "--in-flight", "--fault", "--isolation",
                     "--operations", "--isolation-fault", "--faults", "--private-key", "--public-key", "--kid", "--issuer",
                     "--audience", "--account", "--tenant", "--lifetime", "--jwks-out", "--jwks", "--mode", "--rounds",
                     "--scale", "--list", "--pair", "--side", "--count", "--only", "--cpu-time", "--backend"] {
            #expect(output.contains(word), "\(word) is not in --help")
        }
    }
}
