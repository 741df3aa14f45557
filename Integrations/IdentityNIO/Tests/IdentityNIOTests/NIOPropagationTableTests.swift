import IdentityRuntime
import IdentityTesting
import Testing

@Suite("IdentityNIO: every row of the package's propagation table, for nil, \"\" and a named identity")
struct NIOPropagationTableTests {
    @Test("row observes what the table says", .timeLimit(.minutes(5)),
          arguments: NIOPropagationTable.checks, PropagationTable.submitters)
    func row(check: PropagationCheck, submitter: Identity?) async {
        let outcome = await check.run(submitter: submitter)
        #expect(!outcome.observed.isEmpty)
        for observed in outcome.observed {
            #expect(observed == outcome.expected, "\(check.mechanism) under \(submitter.tableDescription)")
        }
    }
}
