import Foundation
import IdentityPostgres
import IdentityProtection
import Logging
import PostgresNIO
import NIOConcurrencyHelpers
import Testing

/// The server the tests use: libpq's variables, as `scripts/with-postgres.sh` exports them.
enum TestDatabase {
    static let server = PostgresFleetConfiguration.fromEnvironment()

    /// Whether a server is configured; the suites are skipped (with the reason shown) when it is not.
    static var isConfigured: Bool { server != nil }

    static let skipReason: Comment = "no PostgreSQL configured (PGHOST unset): run scripts/with-postgres.sh to test against a throwaway server"

    /// A new empty database on the server, and a fleet configuration for it with short timeouts.
    static func make() async throws -> PostgresFleetConfiguration {
        let server = try #require(server)
        let name = "identity_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try await admin { connection in
            _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        var configuration = server
        configuration.database = String(name)
        configuration.connectTimeout = 2
        configuration.queryTimeout = 2
        configuration.policyPollInterval = 5
        return configuration
    }

    static let logger = Logger(label: "identity-postgres-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Runs `body` on a connection to `configuration`'s database (the server's default database when `nil`).
    static func admin<T: Sendable>(
        _ configuration: PostgresFleetConfiguration? = nil, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let target = try #require(configuration ?? server)
        var settings = PostgresConnection.Configuration(
            host: target.host, port: target.port, username: target.username, password: target.password,
            database: target.database, tls: .disable)
        settings.options.connectTimeout = .seconds(5)
        let connection = try await PostgresConnection.connect(configuration: settings, id: 1, logger: logger)
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// A fresh set of key-encryption keys, in the text form the nodes read from IDENTITY_KEK.
    static func makeKEKText() throws -> String {
        "kek-test:" + Data(try ProtectionKey.generate().material).base64EncodedString()
    }

    /// Polls `condition` every 5 ms until it holds or `seconds` passed.
    static func eventually(within seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(5_000)
        }
        return try condition()
    }
}

/// A child process running `identity-postgres-node serve`, spoken to line by line.
final class NodeProcess: Sendable {
    private let process: Process
    private let input: FileHandle
    private let output = LineBuffer()

    /// The lines a child printed, filled by its pipe's handler.
    private final class LineBuffer: Sendable {
        let lines = NIOLockedValueBox<(buffer: Data, lines: [String], closed: Bool)>((Data(), [], false))
        let arrived = DispatchSemaphore(value: 0)
    }

    /// The node binary, built beside the test bundle.
    static var executable: URL {
        if let path = ProcessInfo.processInfo.environment["IDENTITY_PG_NODE"] { return URL(fileURLWithPath: path) }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("identity-postgres-node").path),
              directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("identity-postgres-node")
    }

    init(configuration: PostgresFleetConfiguration, kek: String, shared: String) throws {
        process = Process()
        process.executableURL = Self.executable
        process.arguments = ["serve", "--shared", shared]
        var environment = ProcessInfo.processInfo.environment
        environment["PGHOST"] = configuration.host
        environment["PGPORT"] = String(configuration.port)
        environment["PGUSER"] = configuration.username
        environment["PGDATABASE"] = configuration.database
        environment["IDENTITY_KEK"] = kek
        process.environment = environment
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        input = stdin.fileHandleForWriting
        stdout.fileHandleForReading.readabilityHandler = { [output] handle in
            let chunk = handle.availableData
            let count: Int = output.lines.withLockedValue { state in
                if chunk.isEmpty { state.closed = true; return 1 }
                state.buffer.append(chunk)
                var added = 0
                while let newline = state.buffer.firstIndex(of: 0x0A) {
                    state.lines.append(String(decoding: state.buffer[state.buffer.startIndex..<newline], as: UTF8.self))
                    state.buffer.removeSubrange(state.buffer.startIndex...newline)
                    added += 1
                }
                return added
            }
            for _ in 0..<count { output.arrived.signal() }
            if chunk.isEmpty { handle.readabilityHandler = nil }
        }
        try process.run()
        let first = try readLine(timeout: 60)
        guard first == "ready" else { throw NodeError.unexpected(first) }
    }

    /// Sends one command line.
    func send(_ line: String) throws {
        try input.write(contentsOf: Data((line + "\n").utf8))
    }

    /// The next line the node printed.
    func readLine(timeout: Double) throws -> String {
        while true {
            if let line = output.lines.withLockedValue({ state -> String? in state.lines.isEmpty ? nil : state.lines.removeFirst() }) {
                return line
            }
            if output.lines.withLockedValue({ $0.closed }) { throw NodeError.exited }
            guard output.arrived.wait(timeout: .now() + timeout) == .success else { throw NodeError.timedOut }
        }
    }

    /// Sends `line` and returns the answer.
    func ask(_ line: String, timeout: Double = 30) throws -> String {
        try send(line)
        return try readLine(timeout: timeout)
    }

    /// Sends `line`, returns the answer after `ok `; fails the test otherwise.
    func ok(_ line: String, timeout: Double = 30) throws -> String {
        let answer = try ask(line, timeout: timeout)
        guard answer.hasPrefix("ok") else { throw NodeError.unexpected("\(line.prefix(40)) -> \(answer)") }
        return String(answer.dropFirst(3))
    }

    func stop() {
        try? send("quit")
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
    }

    enum NodeError: Error {
        case timedOut, exited
        case unexpected(String)
    }
}

extension Data {
    var base64: String { base64EncodedString() }
}
