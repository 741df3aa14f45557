import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// Admission checks take time. What happened to the account while they ran decides too: an account blocked,
/// wiped, dropped from the allowed accounts or left undecided meanwhile is refused when its checks pass, by the
/// admission that ran them and by every admission that waited for that run.
@Suite("An admission decided again when its checks pass")
struct AdmissionAfterChecksTests {
    /// A manager that manages alice (and knows bob), with one gated check and passes cached for an hour.
    private func gatedManager(
        _ settings: RuntimeSettings = RuntimeSettings()
    ) -> (PolicyManager, Gate, Recorder<Identity>) {
        var settings = settings
        settings.admissionCacheDuration = 3_600
        let manager = PolicyManager(
            settings: settings,
            policySource: StaticPolicySource([alice: ownedPolicy("alice"), bob: ownedPolicy("bob")]))
        let gate = Gate()
        let runs = Recorder<Identity>()
        manager.registerAdmissionCheck(GatedAdmissionCheck(gate: gate, runs: runs))
        return (manager, gate, runs)
    }

    @Test("an account blocked while its checks run is refused when they pass, leader and waiters alike")
    func blockedWhileChecksRun() async throws {
        let (manager, gate, runs) = gatedManager()
        let ran = Recorder<Identity?>()
        let leader = Task { try await manager.withAdmittedIdentity(alice) { ran.append(IdentityContext.currentThreadIdentity) } }
        #expect(await eventually { gate.entered == 1 })
        let waiter = Task { try await manager.withAdmittedIdentity(alice) { ran.append(IdentityContext.currentThreadIdentity) } }
        // The second admission joins the run under way (it runs no check itself).
        #expect(await eventually { manager.state.withLock { $0.admission.waitingAdmissions(of: alice) } == 1 })
        manager.blockAccount(alice, reason: .clockedOut)
        gate.open()
        let refused = AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.clockedOut))
        await #expect(throws: refused) { try await leader.value }
        await #expect(throws: refused) { try await waiter.value }
        #expect(ran.count == 0)
        #expect(runs.count == 1)
        // Nothing else was refused: bob's admission runs the check and passes.
        try await manager.withAdmittedIdentity(bob) { ran.append(IdentityContext.currentThreadIdentity) }
        #expect(ran.all == [bob])
    }

    @Test("an account wiped while its checks run is refused when they pass")
    func wipedWhileChecksRun() async throws {
        let (manager, gate, _) = gatedManager()
        let ran = Recorder<Identity?>()
        let admission = Task { try await manager.withAdmittedIdentity(alice) { ran.append(IdentityContext.currentThreadIdentity) } }
        #expect(await eventually { gate.entered == 1 })
        _ = await manager.wipeData(forAccount: alice)
        gate.open()
        await #expect(throws: AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.wiped))) {
            try await admission.value
        }
        #expect(ran.count == 0)
    }

    @Test("an account dropped from the allowed accounts while its checks run is refused when they pass")
    func disallowedWhileChecksRun() async throws {
        var settings = RuntimeSettings()
        settings.allowedAccounts = [alice, bob]
        let (manager, gate, _) = gatedManager(settings)
        let admission = Task { try await manager.withAdmittedIdentity(alice) {} }
        #expect(await eventually { gate.entered == 1 })
        var narrowed = manager.settings
        narrowed.allowedAccounts = [bob]
        manager.settings = narrowed
        gate.open()
        await #expect(throws: AdmissionError(account: alice, result: .notAllowed, cause: .notInAllowedAccounts)) {
            try await admission.value
        }
    }

    @Test("the completion-handler form refuses an account blocked while its checks run, and never runs the operation")
    func completionFormBlockedWhileChecksRun() async throws {
        let (manager, gate, _) = gatedManager()
        let ran = Recorder<Identity?>()
        let answer = Recorder<AdmissionError?>()
        manager.withAdmittedIdentity(alice, operation: { ran.append(IdentityContext.currentThreadIdentity) }) { error in
            answer.append(error)
        }
        #expect(await eventually { gate.entered == 1 })
        manager.blockAccount(alice, reason: .blockedByAdministrator)
        gate.open()
        #expect(await eventually { answer.count == 1 })
        #expect(answer.all == [AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.blockedByAdministrator))])
        #expect(ran.count == 0)
    }

    @Test("a pass that lifts its own denial's block admits: the retry of a denied account still works")
    func retriedDenialStillAdmits() async throws {
        var settings = RuntimeSettings()
        settings.admissionRetryInterval = 0
        let decisions = LockedValue<[AdmissionOutcome]>([.deny("not yet"), .admit])
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource([alice: ownedPolicy("alice")]))
        manager.registerAdmissionCheck(CountingAdmissionCheck { _ in decisions.withLock { $0.removeFirst() } })
        await #expect(throws: AdmissionError(account: alice, result: .failed, cause: .denied("not yet"))) {
            try await manager.withAdmittedIdentity(alice) {}
        }
        #expect(manager.blockReason(for: alice) == .admissionCheckFailed)
        let seen = try await manager.withAdmittedIdentity(alice) { IdentityContext.currentThreadIdentity }
        #expect(seen == alice)
        #expect(manager.blockReason(for: alice) == .notBlocked)
    }
}
