// A fleet member for the multi-process tests, and the benchmark.
//
//   identity-postgres-node serve [--shared DIR]   answers one command per stdin line (see `Server`)
//   identity-postgres-node bench [--quick]        prints the speed figures of Sources/IdentityRuntime/IdentityRuntime.docc/RunningAFleet.md
//   identity-postgres-node tenant-bench [--quick] a tenant-bound read against a plain one (TenantIsolationInPostgreSQL.md)
//
// The database comes from libpq's variables (PGHOST, PGPORT, PGUSER, PGDATABASE), the key-encryption keys from
// IDENTITY_KEK (the StaticKeyEncryptionKeys text form).
import Foundation
import IdentityPostgres
import IdentityProtection

@main
struct Node {
    static func main() async throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard let command = arguments.first else {
            FileHandle.standardError.write(Data("usage: identity-postgres-node serve [--shared DIR] | bench [--quick] | tenant-bench [--quick]\n".utf8))
            exit(64)
        }
        guard var configuration = PostgresFleetConfiguration.fromEnvironment() else {
            FileHandle.standardError.write(Data("identity-postgres-node: PGHOST is not set\n".utf8))
            exit(69)
        }
        configuration.queryTimeout = Double(ProcessInfo.processInfo.environment["IDENTITY_PG_QUERY_TIMEOUT"] ?? "") ?? 2
        configuration.connectTimeout = 1
        if command == "tenant-bench" {
            try await TenantBench(configuration: configuration, quick: arguments.contains("--quick")).run()
            return
        }
        let keks = try StaticKeyEncryptionKeys(environmentVariable: "IDENTITY_KEK")
        switch command {
        case "serve":
            let shared = value(of: "--shared", in: arguments) ?? NSTemporaryDirectory()
            let server = try await Server(configuration: configuration, keks: keks, sharedDirectory: shared)
            // The command loop is synchronous code on a thread of its own, as GCD and thread code calls the stores.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    server.run()
                    continuation.resume()
                }
            }
        case "bench":
            try await Bench(configuration: configuration, keks: keks, quick: arguments.contains("--quick")).run()
        default:
            FileHandle.standardError.write(Data("identity-postgres-node: unknown command \(command)\n".utf8))
            exit(64)
        }
    }

    static func value(of option: String, in arguments: [String]) -> String? {
        guard let index = arguments.firstIndex(of: option), index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }
}

/// Milliseconds since 1970, comparable between processes on one machine.
func wallClockMilliseconds() -> Double {
    Date().timeIntervalSince1970 * 1000
}
