import Synchronization

/// Strict mode's record of one asynchronous unit: where it was submitted, what it must observe, and how
/// often it ran. Reports a unit that was released without running.
package final class UnitTracker: Sendable {
    /// How often a unit must run.
    package enum Runs: Sendable {
        /// Blocks and operations: once, and never dropped.
        case exactlyOnce
        /// Work items: any number of times, but not never (unless cancelled).
        case atLeastOnce
        /// Source handlers: any number of times, including none.
        case any
    }

    let site: SubmitSite
    let expected: Identity?
    private let expectedRuns: Runs
    private let runs = Atomic<Int>(0)
    private let cancelled = Atomic<Bool>(false)

    init(site: SubmitSite, expected: Identity?, runs: Runs) {
        self.site = site
        self.expected = expected
        self.expectedRuns = runs
    }

    deinit {
        if expectedRuns != .any && runs.load(ordering: .relaxed) == 0 && !cancelled.load(ordering: .relaxed) {
            RuntimeIssues.report(.unitNeverRan(site: site))
        }
    }

    /// The unit was cancelled on purpose: not running it is no issue.
    func markCancelled() {
        cancelled.store(true, ordering: .relaxed)
    }

    /// Runs `body` (which binds the unit's identity) with the entry and exit checks.
    func run(_ body: () -> Void) {
        let count = runs.add(1, ordering: .relaxed).newValue
        if expectedRuns == .exactlyOnce && count > 1 {
            RuntimeIssues.report(.unitRanTwice(site: site))
        }
        let before = IdentityContext.currentThreadIdentity
        body()
        let after = IdentityContext.currentThreadIdentity
        if after != before {
            RuntimeIssues.report(.identityLeaked(site: site, before: before, after: after))
        }
    }

    /// The entry check, called inside the unit's scope before its work.
    func checkEntry() {
        let observed = IdentityContext.currentThreadIdentity
        if observed != expected {
            RuntimeIssues.report(.misattributed(site: site, expected: expected, observed: observed))
        }
    }
}
