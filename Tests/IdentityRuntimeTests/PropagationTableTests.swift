import IdentityRuntime
import IdentityTesting
import Testing

@Suite("Every row of the propagation table, for nil, \"\" and a named identity")
struct PropagationTableTests {
    @Test("row observes what the table says", .timeLimit(.minutes(5)),
          arguments: PropagationTable.checks, PropagationTable.submitters)
    func row(check: PropagationCheck, submitter: Identity?) async {
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
