import IdentityRuntime

extension IdentityStrictMode {
    /// Runs `body` and returns the runtime issues that `isExpected` accepts, reported by any thread while it
    /// runs, in the order they were reported.
    ///
    /// Those issues are the test's own, caused on purpose: they are not printed, not handed to the report
    /// handler, and not fatal under `IDENTITY_STRICT=fatal`, so a passing run prints nothing. Every other issue
    /// is reported as usual. Other tests run in parallel in the same process: match only what this test
    /// causes (a kind together with a submit site in the test's file, or an identity no other test uses).
    ///
    /// ```swift
    /// let (_, issues) = await IdentityStrictMode.capturingIssues(matching: { $0.kind == "unitRanTwice" && $0.site?.fileID.description == #fileID }) {
    ///     // submit a unit that runs twice
    /// }
    /// #expect(issues.count == 1)
    /// ```
    public static func capturingIssues<Result>(
        matching isExpected: @escaping @Sendable (RuntimeIssue) -> Bool, _ body: () async throws -> Result
    ) async rethrows -> (Result, [RuntimeIssue]) {
        let capture = IssueCapture(isExpected)
        defer { capture.end() }
        let result = try await body()
        return (result, capture.issues)
    }

    /// ``capturingIssues(matching:_:)`` for synchronous code.
    public static func capturingIssues<Result>(
        matching isExpected: @escaping @Sendable (RuntimeIssue) -> Bool, _ body: () throws -> Result
    ) rethrows -> (Result, [RuntimeIssue]) {
        let capture = IssueCapture(isExpected)
        defer { capture.end() }
        let result = try body()
        return (result, capture.issues)
    }
}

/// The issues one ``IdentityStrictMode/capturingIssues(matching:_:)`` call has taken, while it is registered.
private final class IssueCapture: Sendable {
    private let taken: LockedValue<[RuntimeIssue]>
    private let token: Int

    init(_ isExpected: @escaping @Sendable (RuntimeIssue) -> Bool) {
        let taken = LockedValue<[RuntimeIssue]>([])
        self.taken = taken
        token = RuntimeIssues.addCapture { issue in
            guard isExpected(issue) else { return false }
            taken.withLock { $0.append(issue) }
            return true
        }
    }

    var issues: [RuntimeIssue] { taken.withLock { $0 } }

    func end() { RuntimeIssues.removeObserver(token) }
}
