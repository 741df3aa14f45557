import Dispatch
import Foundation
import IdentityRuntime
import IdentityTesting
import IsolationStress

/// `identity-harness`: live checks of the identity runtime.
///
/// Commands:
/// - `verify` (the default): runs every row of the propagation table (docs/identities-and-propagation.md) for the submitter
///   identities `nil`, `""` and a named account, prints expected vs observed per row, and exits 1 on any
///   mismatch (2 if a row never completes).
/// - `stress`: seeded random programs over every mechanism, checked unit by unit; `soak`: the same, longer,
///   watching resident memory. `stress --isolation`: the randomized tenant-isolation program
///   (``IsolationStress``) instead, with a per-API table.
/// - `bench`: raw primitive vs identity-carrying wrapper pairs, interleaved, median ratio wrapped/raw.
@main
struct IdentityHarness {
    static func main() async {
        var arguments = CommandLine.arguments.dropFirst()
        let command = arguments.popFirst() ?? "verify"
        switch command {
        case "verify":
            exit(await VerifyCommand.run() ? 0 : 1)
        case "stress" where arguments.contains("--isolation"):
            guard let options = StressCommand.parse(arguments.filter { $0 != "--isolation" }, defaults: .init()) else { exit(64) }
            exit(await runIsolation(options) ? 0 : 1)
        case "stress":
            guard let options = StressCommand.parse(arguments, defaults: .init()) else { exit(64) }
            exit(StressCommand.run(options) ? 0 : 1)
        case "wipe-child":
            exit(WipeChildCommand.run(arguments) ? 0 : 1)
        case "assertion":
            exit(AssertionCommand.run(arguments) ? 0 : 1)
        case "soak":
            var defaults = StressCommand.Options()
            defaults.duration = 600
            defaults.memory = true
            guard let options = StressCommand.parse(arguments, defaults: defaults) else { exit(64) }
            exit(StressCommand.run(options) ? 0 : 1)
        case "bench":
            exit(BenchCommand.run(arguments: arguments) ? 0 : 1)
        case "help", "--help", "-h":
            print(usage)
        default:
            FileHandle.standardError.write(Data("unknown command '\(command)'\n\(usage)\n".utf8))
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
        print("stress --isolation: seed \(options.seed), \(options.accounts) accounts in \(options.tenants) tenants, "
            + "\(options.workers) workers, " + (options.operations.map { "\($0) operations" } ?? "\(Int(options.duration)) s")
            + (options.fault == .none ? "" : ", gate removed on purpose: \(options.fault.rawValue) (must fail)"))
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
        usage: identity-harness [verify | stress OPTIONS | soak OPTIONS | bench [--rounds N] [--scale X]]
          verify   run every row of the propagation table live; exit 1 on any mismatch
          stress   random programs mixing every mechanism; exit 1 on any misattribution or leak
                   --seed N (1) --duration S (10) --identities K (64) --depth D (12) --in-flight N (64)
                   --fault none|skip-restore|capture-at-run (self-check: must then fail)
                   --isolation: the randomized tenant-isolation program instead (--seed, --duration, or
                   --operations N; --isolation-fault no-modify-check|no-read-check|no-transfer-check: must then fail)
          soak     stress for 600 s by default, also reporting resident memory growth per million units
          assertion keygen | sign --private-key HEX --kid K --issuer I --audience A --account NAME [--tenant T]
                   | verify --public-key HEX --kid K --issuer I --audience A  (tokens on standard input)
          bench    raw vs identity-carrying primitives, interleaved, median ratio and spread
                   (use: swift run -c release identity-harness bench)
        """
}
