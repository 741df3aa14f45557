import IdentityRuntime
import IdentityTesting
import Testing

@Suite("Every row of the propagation table, for nil, \"\" and a named identity")
struct PropagationTableTests {
    @Test("row observes what the table says", .timeLimit(.minutes(5)),
          arguments: PropagationTable.checks.filter { !$0.requiresMainQueue }, PropagationTable.submitters)
    func row(check: PropagationCheck, submitter: Identity?) async {
        await expectRow(check, submitter: submitter)
    }

    /// The main actor's rows read the UI identities and the process identity, which are process-wide: other
    /// suites reset them (`ResolutionTests`), so these rows hold the process identity for themselves. The
    /// limit guards against a hang only: it counts the wait for the other holders too (about a minute on an
    /// idle machine, several on a loaded one).
    @Test("main-actor row observes what the table says", .exclusiveProcessIdentity, .timeLimit(.minutes(15)),
          arguments: PropagationTable.checks.filter(\.requiresMainQueue), PropagationTable.submitters)
    func mainActorRow(check: PropagationCheck, submitter: Identity?) async {
        await expectRow(check, submitter: submitter)
    }

    private func expectRow(_ check: PropagationCheck, submitter: Identity?) async {
        let outcome = await check.run(submitter: submitter)
        if outcome.skipped != nil {
            // Only rows on the main actor may be skipped, and only where the process never services the main queue.
            #expect(check.requiresMainQueue)
            return
        }
        #expect(!outcome.observed.isEmpty)
        for observed in outcome.observed {
            #expect(observed == outcome.expected, "\(check.mechanism) under \(submitter.tableDescription)")
        }
    }
}
