import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// Changing the admission checks forgets every pass, also the pass of a run that was under way: the checks
/// that were replaced cannot admit anyone after the change.
@Suite("Admission checks changed while a run is under way")
struct AdmissionChecksChangeTests {
    @Test("a pass of the checks a change replaced is not cached: the next admission runs the new checks")
    func passOfReplacedChecksIsNotCached() async throws {
        let gate = Gate()
        let oldRuns = Recorder<Identity>()
        var settings = RuntimeSettings()
        settings.admissionCacheDuration = 3_600
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource([alice: ownedPolicy("alice")]))
        manager.registerAdmissionCheck(GatedAdmissionCheck(gate: gate, runs: oldRuns))
        let underWay = Task { try await manager.withAdmittedIdentity(alice) {} }
        #expect(await eventually { gate.entered == 1 })
        let replacement = CountingAdmissionCheck { _ in .deny("new rules") }
        manager.admissionChecks = [replacement]
        // An admission that starts now runs the new checks; it does not wait for the old ones. (Waiting for
        // them would hang here until the gate opens: bounded, so that a regression fails instead.)
        let afterChange = Task { try await manager.withAdmittedIdentity(alice) {} }
        await #expect(throws: AdmissionError(account: alice, result: .failed, cause: .denied("new rules"))) {
            try await afterChange.value
        }
        #expect(replacement.runs.count == 1)
        gate.open()
        // The old run passes, but the new checks denied and blocked the account meanwhile: the admission that
        // started the old run is refused, and the old pass lifts nothing.
        await #expect(throws: AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.admissionCheckFailed))) {
            try await underWay.value
        }
        #expect(manager.blockReason(for: alice) == .admissionCheckFailed)
        #expect(!manager.isDataTransferAllowed(from: alice, to: alice))
        manager.unblockAccount(alice, reason: .admissionCheckFailed)
        var retrying = manager.settings
        retrying.admissionRetryInterval = 0
        manager.settings = retrying
        #expect(try manager.admitWithoutWaiting(alice) == false)
        await #expect(throws: AdmissionError(account: alice, result: .failed, cause: .denied("new rules"))) {
            try await manager.withAdmittedIdentity(alice) {}
        }
        #expect(oldRuns.count == 1)
        #expect(replacement.runs.count == 2)
    }
}
