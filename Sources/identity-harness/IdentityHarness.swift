import Dispatch
import Foundation
import IdentityRuntime
import IdentityTesting

/// `identity-harness`: live checks of the identity runtime.
///
/// Commands:
/// - `verify` (the default): runs every row of the propagation table (DESIGN §3) for the submitter
///   identities `nil`, `""` and a named account, prints expected vs observed per row, and exits 1 on any
///   mismatch (2 if a row never completes).
/// - `bench`: raw primitive vs identity-carrying wrapper pairs, interleaved, median ratio wrapped/raw.
@main
struct IdentityHarness {
    static func main() async {
        var arguments = CommandLine.arguments.dropFirst()
        let command = arguments.popFirst() ?? "verify"
        switch command {
        case "verify":
            exit(await VerifyCommand.run() ? 0 : 1)
        case "bench":
            exit(BenchCommand.run(arguments: arguments) ? 0 : 1)
        case "help", "--help", "-h":
            print(usage)
        default:
            FileHandle.standardError.write(Data("unknown command '\(command)'\n\(usage)\n".utf8))
            exit(64)
        }
    }

    static let usage = """
        usage: identity-harness [verify | bench [--rounds N] [--scale X]]
          verify   run every row of the propagation table live; exit 1 on any mismatch
          bench    raw vs identity-carrying primitives, interleaved, median ratio and spread
                   (use: swift run -c release identity-harness bench)
        """
}
