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
    public static func capturingIssues<Result, Failure: Error>(
        matching isExpected: @escaping @Sendable (RuntimeIssue) -> Bool, _ body: () async throws(Failure) -> Result
    ) async throws(Failure) -> (Result, [RuntimeIssue]) {
        let capture = IssueCapture(isExpected)
        let result: Result
        do { result = try await body() } catch {
            _ = capture.end()
            throw error
        }
        return (result, capture.end())
    }

    /// ``capturingIssues(matching:_:)`` for synchronous code.
    public static func capturingIssues<Result, Failure: Error>(
        matching isExpected: @escaping @Sendable (RuntimeIssue) -> Bool, _ body: () throws(Failure) -> Result
    ) throws(Failure) -> (Result, [RuntimeIssue]) {
        let capture = IssueCapture(isExpected)
        let result: Result
        do { result = try body() } catch {
            _ = capture.end()
            throw error
        }
        return (result, capture.end())
    }
}

/// The issues one ``IdentityStrictMode/capturingIssues(matching:_:)`` call has taken, while it is open.
///
/// ``end()`` closes it and returns what it took, under the same lock as the taking: an issue reported on
/// another thread as the capture ends is either returned or, once closed, no longer taken (it is then reported
/// as usual), never lost between the two.
private final class IssueCapture: Sendable {
    private let state: LockedValue<(open: Bool, taken: [RuntimeIssue])>
    private let token: Int

    init(_ isExpected: @escaping @Sendable (RuntimeIssue) -> Bool) {
        let state = LockedValue<(open: Bool, taken: [RuntimeIssue])>((true, []))
        self.state = state
        token = RuntimeIssues.addCapture { issue in
            guard isExpected(issue) else { return false }
            return state.withLock { state in
                guard state.open else { return false }
                state.taken.append(issue)
                return true
            }
        }
    }

    /// Closes the capture and returns the issues it took.
    func end() -> [RuntimeIssue] {
        RuntimeIssues.removeObserver(token)
        return state.withLock { state in
            state.open = false
            return state.taken
        }
    }
}
