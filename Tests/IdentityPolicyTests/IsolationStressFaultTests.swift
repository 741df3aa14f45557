import IdentityTesting
import IsolationStress
import Testing

/// The randomized isolation program with faults injected (article ServiceBoundary, "Testing it"): each fault
/// class on its own, and a self-check per invariant that proves the program catches its violation.
@Suite("Randomized isolation with faults: slow and silent key stores, cancellation, broken and deleted policies, unwalkable entries, wipes under open handles",
       .exclusiveProcessIdentity)
struct IsolationStressFaultTests {
    /// The fault classes whose invariants the runtime keeps. A class outside it runs as a known issue: its
    /// violations are expected until the runtime is fixed (a run may also miss them: intermittent). Once it is,
    /// move the class in here and into the full lane's `--faults` (.ci/lib.sh, `step_stress_isolation`).
    static let kept = Set(IsolationStress.FaultClass.allCases)

    @Test("each fault class: the run injects it and, once the runtime keeps its invariants, finds 0 violations",
          arguments: IsolationStress.FaultClass.allCases)
    func faultClass(_ fault: IsolationStress.FaultClass) async throws {
        var options = IsolationStress.Options()
        options.seed = 20_261_126
        options.operations = 6_000
        options.faults = [fault]
        let report = try await IsolationStress.run(options)
        // The fault happened: calls interrupted, documents changed, wipes run.
        switch fault {
        case .slowKeyStore: #expect(report.rows.contains { $0.interrupted > 0 }, "\(report.table)")
        // Whether a cancelled call was still waiting (113) or had already done its work depends on the
        // machine's load: that calls were cancelled before they answered is what the injection promises.
        case .cancellation: #expect(report.cancellations > 0, "\(report.table)")
        case .brokenPolicies: #expect(report.policyChanges > 0, "\(report.table)")
        case .unwalkableEntries, .wipes: #expect(report.wipes > 0, "\(report.table)")
        }
        if Self.kept.contains(fault) {
            #expect(report.passed, "\(report.table)")
        } else {
            withKnownIssue("\(fault.rawValue): the runtime does not keep this class's invariants yet", isIntermittent: true) {
                #expect(report.passed, "\(report.table)")
            }
        }
    }

    @Test("each new invariant's self-check: with its violation injected on purpose, the run fails on that invariant",
          arguments: [IsolationStress.Fault.truncateBeforeKey, .forgetRecordedIsolation, .keepDestroyedKeys, .hideWipeLeftovers,
                      .ignoreBrokenPolicy])
    func invariantSelfCheck(_ fault: IsolationStress.Fault) async throws {
        var options = IsolationStress.Options()
        options.seed = 29
        options.operations = 8_000
        options.fault = fault
        let report = try await IsolationStress.run(options)
        #expect(!report.passed, "\(fault.rawValue): \(report.table)")
        switch fault {
        case .truncateBeforeKey: #expect(report.lostData > 0, "\(report.table)")
        case .forgetRecordedIsolation: #expect(report.withdrawnLeaks > 0, "\(report.table)")
        case .keepDestroyedKeys: #expect(report.destroyedKeyPlaintext > 0, "\(report.table)")
        case .hideWipeLeftovers: #expect(report.unreportedLeftovers > 0, "\(report.table)")
        case .ignoreBrokenPolicy: #expect(report.brokenPolicyAllowances > 0, "\(report.table)")
        case .none, .noModifyCheck, .noReadCheck, .noTransferCheck: Issue.record("not a self-check of a fault class")
        }
    }

    @Test("fault class names parse from the command line's list, and nothing else does")
    func parsing() {
        #expect(IsolationStress.FaultClass.parse("slow-key-store,wipes") == [.slowKeyStore, .wipes])
        #expect(IsolationStress.FaultClass.parse("all") == Set(IsolationStress.FaultClass.allCases))
        #expect(IsolationStress.FaultClass.parse("none") == [])
        #expect(IsolationStress.FaultClass.parse("wipes,gremlins") == nil)
    }
}
