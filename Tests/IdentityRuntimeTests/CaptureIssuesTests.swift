import IdentityTesting
import Testing
@testable import IdentityRuntime

@Suite("Captured runtime issues: expected reports are returned, not printed")
struct CaptureIssuesTests {
    @Test("a capture takes the issues it matches from the handler; the others still reach it")
    func captureKeepsMatchesFromTheHandler() {
        let handled = LockedValue<[RuntimeIssue]>([])
        let observed = LockedValue<[RuntimeIssue]>([])
        let marker = Identity("capture-issues-marker@contoso.com")
        let other = Identity("capture-issues-other@contoso.com")
        // Tests run in parallel: the handler and the observer keep only this test's markers.
        let mine: @Sendable (RuntimeIssue) -> Bool = { $0 == .unscopedChangeInTask(marker) || $0 == .unscopedChangeInTask(other) }
        // The handler is the process's: every other test's issue goes on to standard error, as by default.
        IdentityStrictMode.setReportHandler { issue in
            if mine(issue) { handled.withLock { $0.append(issue) } } else { StandardError.write("identity runtime issue: \(issue)\n") }
        }
        defer { IdentityStrictMode.setReportHandler(nil) }
        let token = RuntimeIssues.addObserver { issue in if mine(issue) { observed.withLock { $0.append(issue) } } }
        defer { RuntimeIssues.removeObserver(token) }

        let (value, captured) = IdentityStrictMode.capturingIssues(matching: { $0 == .unscopedChangeInTask(marker) }) {
            RuntimeIssues.report(.unscopedChangeInTask(marker))
            RuntimeIssues.report(.unscopedChangeInTask(other))
            return 7
        }
        #expect(value == 7)
        #expect(captured == [.unscopedChangeInTask(marker)])
        #expect(handled.withLock { $0 } == [.unscopedChangeInTask(other)])
        // Observers see every issue, captured or not.
        #expect(observed.withLock { $0 } == [.unscopedChangeInTask(marker), .unscopedChangeInTask(other)])

        // After the capture ends, the same issue reaches the handler again.
        RuntimeIssues.report(.unscopedChangeInTask(marker))
        #expect(handled.withLock { $0 } == [.unscopedChangeInTask(other), .unscopedChangeInTask(marker)])
    }

    @Test("IDENTITY_STRICT: empty, 0, false, no and off mean off in any case; fatal is fatal; anything else is on")
    func environmentSetting() {
        for off in [nil, "", "0", "false", "FALSE", "No", "no", "off", "Off"] as [String?] {
            #expect(IdentityStrictMode.parseSetting(off) == nil, "\(String(describing: off))")
        }
        #expect(IdentityStrictMode.parseSetting("1") == "1")
        #expect(IdentityStrictMode.parseSetting("true") == "true")
        #expect(IdentityStrictMode.parseSetting("FATAL") == "fatal")
    }
}
