import AsyncHTTPClient
import Foundation
import IdentityAssertions
import TenantServiceKit

/// The audit service in a process of its own: `tenant-load --serve-audit KEY --port-file FILE` (started by
/// ``AuditProcess``) serves ``AuditService`` on 127.0.0.1, trusting the document service's public key `KEY`
/// (64 hex digits), writes its port to `FILE`, and runs until its standard input ends (the parent closed it,
/// or died).
func serveAudit(trustedKeyHex: String, portFile: String, echo: Bool) async -> Int32 {
    guard let bytes = hexBytes(trustedKeyHex), let key = try? AssertionVerificationKey(rawRepresentation: bytes) else {
        print("tenant-load --serve-audit: the key must be 64 hex digits")
        return 2
    }
    let service = AuditService(trustedKey: key, echo: echo)
    let application = service.application { port in
        // Written whole, then renamed: the parent never reads half a port.
        try? Data("\(port)\n".utf8).write(to: URL(fileURLWithPath: portFile + ".tmp"))
        _ = rename(portFile + ".tmp", portFile)
    }
    do {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.runService(gracefulShutdownSignals: [.sigterm]) }
            group.addTask { await standardInputEnded() }
            _ = try await group.next()
            group.cancelAll()
        }
        return 0
    } catch {
        print("tenant-load --serve-audit: \(error)")
        return 1
    }
}

/// Returns once standard input reaches its end (read on a thread of its own, never on the cooperative pool).
func standardInputEnded() async {
    await withCheckedContinuation { (ended: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 256)
            while read(0, &buffer, buffer.count) > 0 {}
            ended.resume()
        }
    }
}

func hexBytes(_ text: String) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count.isMultiple(of: 2) else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
        bytes.append(byte)
    }
    return bytes
}

/// A child process running the audit service (this executable with `--serve-audit`), stopped by closing its
/// standard input.
final class AuditProcess: Sendable {
    let url: String
    private let process: Process
    private let input: Pipe

    /// Starts the child and waits (up to 120 s: a loaded machine) until it listens.
    init(trusting key: AssertionVerificationKey, echo: Bool) async throws {
        guard let executable = Bundle.main.executableURL else { throw UsageError("cannot find this executable to start the audit service") }
        let portFile = NSTemporaryDirectory() + "tenant-audit-\(UUID().uuidString).port"
        let process = Process()
        process.executableURL = executable
        process.arguments = ["--serve-audit", key.rawRepresentation.map { String(format: "%02x", $0) }.joined(), "--port-file", portFile]
            + (echo ? ["--echo-audit-log"] : [])
        let input = Pipe()
        process.standardInput = input
        try process.run()
        self.process = process
        self.input = input
        defer { try? FileManager.default.removeItem(atPath: portFile) }
        var port: Int?
        for _ in 0..<2_400 {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let value = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                port = value
                break
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard let port, port > 0 else {
            Self.stop(process, input: input)
            throw UsageError("the audit service process did not start")
        }
        url = "http://127.0.0.1:\(port)"
    }

    /// The audit log's counts, from the child's `GET /summary`.
    func summary(client: HTTPClient) async throws -> AuditSummary {
        let response = try await client.execute(HTTPClientRequest(url: url + "/summary"), timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return try JSONDecoder().decode(AuditSummary.self, from: Data(buffer: body))
    }

    /// Closes the child's standard input and waits for it to end (10 s, then SIGKILL).
    func stop() { Self.stop(process, input: input) }

    private static func stop(_ process: Process, input: Pipe) {
        try? input.fileHandleForWriting.close()
        for _ in 0..<200 where process.isRunning { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}
