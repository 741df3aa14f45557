import Dispatch
import Foundation
import IdentityRuntime
import IdentityTesting
import Synchronization

/// Runs the propagation table and prints one line per row and submitter.
enum VerifyCommand {
    /// Seconds a single row may take before the harness gives up on it.
    static let rowTimeout = 30

    static func run() async -> Bool {
        let watchdog = Watchdog(seconds: rowTimeout)
        let rows = PropagationTable.checks.flatMap { check in PropagationTable.submitters.map { (check, $0) } }
        let widths = (
            mechanism: PropagationTable.checks.map(\.mechanism.count).max() ?? 10,
            captured: max(8, PropagationTable.checks.map(\.captured.count).max() ?? 8)
        )
        print(line("mechanism", widths.mechanism, "captured at", widths.captured, "submitter", "expected", "observed", "result"))
        var failures = 0
        var skipped = 0
        for (check, submitter) in rows {
            watchdog.arm("\(check.mechanism) with submitter \(submitter.tableDescription)")
            let outcome = await check.run(submitter: submitter)
            if let reason = outcome.skipped {
                skipped += 1
                print(line(
                    check.mechanism, widths.mechanism, check.captured, widths.captured,
                    submitter.tableDescription, outcome.expected.tableDescription, "—", "skipped: \(reason)"))
                continue
            }
            if !outcome.passed { failures += 1 }
            print(line(
                check.mechanism, widths.mechanism, check.captured, widths.captured,
                submitter.tableDescription, outcome.expected.tableDescription,
                outcome.shownObservation.tableDescription, outcome.passed ? "ok" : "MISMATCH"))
        }
        watchdog.disarm()
        print("\(rows.count - failures - skipped) passed, \(failures) failed" + (skipped > 0 ? ", \(skipped) skipped" : ""))
        return failures == 0
    }

    static func line(
        _ mechanism: String, _ mechanismWidth: Int, _ captured: String, _ capturedWidth: Int,
        _ submitter: String, _ expected: String, _ observed: String, _ result: String
    ) -> String {
        [
            mechanism.padding(toLength: mechanismWidth, withPad: " ", startingAt: 0),
            captured.padding(toLength: capturedWidth, withPad: " ", startingAt: 0),
            submitter.padding(toLength: 20, withPad: " ", startingAt: 0),
            expected.padding(toLength: 20, withPad: " ", startingAt: 0),
            observed.padding(toLength: 20, withPad: " ", startingAt: 0),
            result,
        ].joined(separator: "  ")
    }
}

/// Ends the process with status 2 if a row does not complete in time (a unit that never ran).
final class Watchdog: Sendable {
    private let state = LockedValue<(row: String, generation: Int)>(("", 0))
    private let seconds: Int

    init(seconds: Int) {
        self.seconds = seconds
    }

    func arm(_ row: String) {
        let generation = state.withLock { state in
            state = (row, state.generation + 1)
            return state.generation
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) { [self] in
            let stuck = state.withLock { $0.generation == generation ? $0.row : nil }
            if let stuck {
                FileHandle.standardError.write(Data("row did not complete within \(seconds) s: \(stuck)\n".utf8))
                exit(2)
            }
        }
    }

    func disarm() {
        state.withLock { $0.generation += 1 }
    }
}
