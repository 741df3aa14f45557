import Dispatch
import Foundation
import IdentityRuntime
import IdentityTesting
import IsolationStress

/// `identity-harness`: live checks of the identity runtime.
///
/// Commands:
/// - `verify` (the default): runs every row of the propagation table (Sources/IdentityRuntime/IdentityRuntime.docc/IdentitiesAndPropagation.md) for the submitter
///   identities `nil`, `""` and a named account, prints expected vs observed per row, and exits 1 on any
///   mismatch (2 if a row never completes).
/// - `stress`: seeded random programs over every mechanism, checked unit by unit; `soak`: the same, longer,
///   watching resident memory. `stress --isolation`: the randomized tenant-isolation program
///   (``IsolationStress``) instead, with a per-API table.
/// - `bench`: raw primitive vs identity-carrying wrapper pairs, interleaved, median ratio wrapped/raw.
/// - `policy check DIR`: lints a policy directory with the runtime's parser (``PolicyCommand``).
@main
struct IdentityHarness {
    static func main() async {
        var arguments = CommandLine.arguments.dropFirst()
        // --help as the command or as a flag of it; never when it is another flag's value (`--kid -h`).
        let flagsOnly = arguments.enumerated().filter { index, _ in index == 0 || !arguments[arguments.startIndex + index - 1].hasPrefix("--") }
        if flagsOnly.contains(where: { ["--help", "-h"].contains($0.element) }) || arguments.first == "help" {
            print(usage)
            exit(0)
        }
        let command = arguments.popFirst() ?? "verify"
        do throws(UsageError) {
            switch command {
            case "verify":
                guard arguments.isEmpty else { throw UsageError(description: "verify takes no options") }
                exit(await VerifyCommand.run() ? 0 : 1)
            case "stress" where arguments.contains("--isolation"):
                let options = try StressCommand.parse(arguments.filter { $0 != "--isolation" }, defaults: .init())
                exit(await runIsolation(options) ? 0 : 1)
            case "stress":
                exit(StressCommand.run(try StressCommand.parse(arguments, defaults: .init())) ? 0 : 1)
            case "wipe-child":
                exit(WipeChildCommand.run(arguments) ? 0 : 1)
            case "assertion":
                exit(AssertionCommand.run(arguments) ? 0 : 1)
            case "policy":
                exit(try PolicyCommand.run(arguments))
            case "soak":
                var defaults = StressCommand.Options()
                defaults.duration = 600
                defaults.memory = true
                exit(StressCommand.run(try StressCommand.parse(arguments, defaults: defaults)) ? 0 : 1)
            case "bench":
                exit(try BenchCommand.run(arguments: arguments) ? 0 : 1)
            default:
                throw UsageError(description: "unknown command '\(command)'")
            }
        } catch {
            FileHandle.standardError.write(Data("identity-harness: \(error)\n\(usage)\n".utf8))
            exit(64)
        }
    }

    /// `stress --isolation`: runs ``IsolationStress`` for the duration and prints its table.
    static func runIsolation(_ stress: StressCommand.Options) async -> Bool {
        var options = IsolationStress.Options()
        options.seed = stress.seed
        options.duration = stress.duration
        options.operations = stress.operations
        options.fault = stress.isolationFault
        options.faults = stress.isolationFaults.union(stress.isolationFault.needs)
        let faults = options.faults.sorted().map(\.rawValue).joined(separator: ",")
        print("stress --isolation: seed \(options.seed), \(options.accounts) accounts in \(options.tenants) tenants, "
            + "\(options.workers) workers, " + (options.operations.map { "\($0) operations" } ?? "\(Int(options.duration)) s")
            + (faults.isEmpty ? "" : ", faults: \(faults)")
            + (options.fault == .none ? "" : ", self-check: \(options.fault.rawValue) (must fail)"))
        do {
            let report = try await IsolationStress.run(options)
            print(report.table)
            print(report.passed ? "isolation: 0 violations" : "isolation: VIOLATIONS")
            return report.passed
        } catch {
            print("isolation: could not set up: \(error)")
            return false
        }
    }

    static let usage = """
        usage: identity-harness [COMMAND [OPTIONS]]   (no command: verify; --help: this text)
          verify   run every row of the propagation table live; exit 1 on any mismatch, 2 if a row never completes
          stress   random programs mixing every mechanism; exit 1 on any misattribution or leak
                   --seed N (1) --duration SECONDS (10) --identities K (64) --depth D (12) --in-flight N (64)
                   --fault none|skip-restore|capture-at-run (self-check: must then fail)
                   --isolation: the randomized tenant-isolation program instead (--seed, --duration, or
                   --operations N; --faults slow-key-store,cancellation,broken-policies,unwalkable-entries,wipes|all|none
                   (fault classes injected; default none); --isolation-fault no-modify-check|no-read-check|
                   no-transfer-check|truncate-before-key|forget-recorded-isolation|keep-destroyed-keys|
                   hide-wipe-leftovers|ignore-broken-policy: a self-check that must then fail)
          soak     stress for 600 s by default (same options), also reporting resident memory growth per million units
          assertion keygen
                   | jwks --public-key HEX --kid K   (prints the JWKS document of one public key)
                   | sign --private-key HEX --kid K --issuer I --audience A --account NAME [--tenant T]
                          [--lifetime SECONDS (300)] [--jwks-out FILE]
                   | verify --issuer I --audience A (--public-key HEX --kid K | --jwks FILE)
                          [--mode single-use|reusable]   (tokens on standard input, one per line)
          policy check DIR
                   read a policy directory with the runtime's parser: one line per error
                   (path:line:column: "key": message), a summary; exit 1 on any error, 2 if DIR cannot be read
          bench    raw vs identity-carrying primitives, interleaved, median ratio and spread
                   (use: swift run -c release identity-harness bench)
                   --rounds N (≥ 1) --scale X (> 0) --list --pair NAME (one pair, one side: for callgrind)
                   --side raw|peer|ours --count N (≥ 0; 0: setup only) --only NAME (print one pair's row) --cpu-time
                   --backend (print the Ed25519 verification backend: libsodium or libcrypto; IDENTITY_SODIUM=off)
          wipe-child  internal: the child process the crash tests kill in the middle of a wipe
        Bad values are errors (exit 64), never replaced by defaults.
        """
}
