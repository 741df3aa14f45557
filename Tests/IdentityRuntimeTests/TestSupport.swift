import Dispatch
import Foundation
@testable import IdentityRuntime
import IdentityTesting
import Synchronization

/// Identities used across the tests.
enum Accounts {
    static let alice: Identity = "alice@contoso.com"
    static let bob: Identity = "bob@fabrikam.com"
    static let carol: Identity = "carol@contoso.com"
    /// Submitter identities every propagation rule is checked with.
    static let submitters: [Identity?] = [nil, .unmanaged, alice]
    /// Many distinct accounts, for stress tests.
    static func many(_ count: Int) -> [Identity] {
        (0..<count).map { Identity("user\($0)@tenant\($0 % 5).example") }
    }
}

/// Waits until `start`'s reporter has been called `count` times and returns what was reported, in order.
func collect<T: Sendable>(_ count: Int = 1, _ start: (@escaping @Sendable (T) -> Void) -> Void) async -> [T] {
    await collectReports(count, start)
}

/// Waits for one reported value.
func observe<T: Sendable>(_ start: (@escaping @Sendable (T) -> Void) -> Void) async -> T {
    await collect(1, start)[0]
}

/// Runs `body` on a new raw thread and waits for it: code there is outside every scope and task.
func onRawThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await observe { report in Thread { report(body()) }.start() }
}

var current: Identity? { IdentityContext.currentThreadIdentity }

/// Captures the runtime issues of the kinds in `kinds` reported anywhere in the process while `body` runs;
/// captured issues are expected, so not printed. Other suites run in parallel, so an issue with a submit site
/// is taken only when the site is in `file` (the calling test's file) or unknown: a real issue of another
/// test is never swallowed by this one.
func capturingRuntimeIssues<R>(
    kinds: Set<String>, file: String = #fileID, _ body: () async throws -> R
) async rethrows -> (R, [RuntimeIssue]) {
    try await IdentityStrictMode.capturingIssues(matching: { issue in
        guard kinds.contains(issue.kind) else { return false }
        guard let site = issue.site else { return true }
        return site.fileID.description == file || site == .unknown
    }, body)
}

struct Boom: Error, Equatable {}
