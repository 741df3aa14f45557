import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// Admissions of one account share a run of its checks. A request cancelled while it waits leaves, refused,
/// without deciding for the others; checks that never answer hold nobody who arrives after
/// ``RuntimeSettings/admissionCheckTimeout``.
@Suite("Waiting for admission checks: cancellation and timeout")
struct AdmissionWaitTests {
    private func manager(timeout: TimeInterval = 3_600, _ check: any AdmissionCheck) -> PolicyManager {
        var settings = RuntimeSettings()
        settings.admissionCacheDuration = 3_600
        settings.admissionCheckTimeout = timeout
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource([alice: ownedPolicy("alice")]))
        manager.registerAdmissionCheck(check)
        return manager
    }

    private func waiting(_ manager: PolicyManager, _ count: Int) async -> Bool {
        await eventually { manager.state.withLock { $0.admission.waitingAdmissions(of: alice) } == count }
    }

    /// Starts an admission of alice that records how it ended (`nil`: admitted), so that a test waits for it
    /// with a bound: a regression that never answers fails the test instead of hanging it.
    private func admission(_ manager: PolicyManager, ran: Recorder<String>, _ name: String) -> (Task<Void, Never>, Recorder<AdmissionError?>) {
        let ended = Recorder<AdmissionError?>()
        let task = Task {
            do {
                try await manager.withAdmittedIdentity(alice) { ran.append(name) }
                ended.append(nil)
            } catch let error as AdmissionError {
                ended.append(error)
            } catch {
                Issue.record("an admission threw \(error), not an AdmissionError")
            }
        }
        return (task, ended)
    }

    @Test("a request cancelled while it waits for a run of the checks is refused; the run answers the others")
    func cancelledWaiterLeaves() async throws {
        let gate = Gate()
        let runs = Recorder<Identity>()
        let manager = manager(GatedAdmissionCheck(gate: gate, runs: runs))
        let ran = Recorder<String>()
        let (_, first) = admission(manager, ran: ran, "first")
        #expect(await waiting(manager, 1))
        let (second, secondEnded) = admission(manager, ran: ran, "second")
        #expect(await waiting(manager, 2))
        second.cancel()
        #expect(await eventually { secondEnded.count == 1 })
        #expect(secondEnded.all == [AdmissionError(account: alice, result: .failed, cause: .unavailable(
            "the admission was cancelled before its checks answered"))])
        #expect(gate.entered == 1 && first.count == 0)
        gate.open()
        #expect(await eventually { first.count == 1 })
        #expect(first.all == [nil])
        #expect(ran.all == ["first"])
        #expect(manager.blockReason(for: alice) == .notBlocked)
        // The run's pass is trusted: the next admission runs no check.
        try await manager.withAdmittedIdentity(alice) { ran.append("third") }
        #expect(runs.count == 1)
    }

    @Test("the admission that started the run, cancelled, leaves; the checks go on for the one that joined")
    func cancelledStarterLeaves() async throws {
        let gate = Gate()
        let runs = Recorder<Identity>()
        let manager = manager(GatedAdmissionCheck(gate: gate, runs: runs))
        let ran = Recorder<String>()
        let (starter, starterEnded) = admission(manager, ran: ran, "starter")
        #expect(await waiting(manager, 1))
        let (_, joiner) = admission(manager, ran: ran, "joiner")
        #expect(await waiting(manager, 2))
        starter.cancel()
        #expect(await eventually { starterEnded.count == 1 })
        #expect(starterEnded.all.first??.cause == .unavailable("the admission was cancelled before its checks answered"))
        gate.open()
        #expect(await eventually { joiner.count == 1 })
        #expect(joiner.all == [nil])
        #expect(ran.all == ["joiner"])
        #expect(runs.count == 1)
    }

    @Test("checks that never answer hold nobody who comes after the timeout: the next admission ends the old run (its waiters refused, its task cancelled, nothing blocked) and runs the checks again")
    func checksThatNeverAnswer() async throws {
        let cancelled = Recorder<Identity>()
        let runs = Recorder<Identity>()
        let check = ClosureAdmissionCheck { account, _ in
            runs.append(account)
            do {
                try await Task.sleep(for: .seconds(3_600))
            } catch {
                cancelled.append(account)
            }
            // Late, after the run was replaced: this pass must admit nobody and be trusted by nobody.
            return .admit
        }
        let manager = manager(check)
        let late = AdmissionError(account: alice, result: .failed, cause: .unavailable(
            "the admission checks of \(alice.debugDescription) did not answer within 1e-06 s"))
        let ran = Recorder<String>()
        let (firstTask, first) = admission(manager, ran: ran, "first")
        #expect(await waiting(manager, 1))
        let (secondTask, second) = admission(manager, ran: ran, "second")
        #expect(await waiting(manager, 2))
        defer { firstTask.cancel(); secondTask.cancel() }
        #expect(first.count == 0 && second.count == 0)
        // Both joined the run under the long timeout; with a microsecond, the run is overdue for whoever
        // comes next (the timeout is read when an admission arrives, so a slow machine changes nothing here).
        var settings = manager.settings
        settings.admissionCheckTimeout = 0.000_001
        manager.settings = settings
        let (thirdTask, third) = admission(manager, ran: ran, "third")
        #expect(await eventually { first.count == 1 && second.count == 1 })
        #expect(first.all == [late] && second.all == [late])
        #expect(await eventually { cancelled.count == 1 && runs.count == 2 })
        #expect(manager.blockReason(for: alice) == .notBlocked)
        thirdTask.cancel()
        #expect(await eventually { third.count == 1 })
        #expect(third.all.first??.cause == .unavailable("the admission was cancelled before its checks answered"))
        #expect(ran.count == 0)
        #expect(manager.blockReason(for: alice) == .notBlocked)
    }

    @Test("a check's own answer is never taken for the runtime's: whatever text it gives, the admission is refused once with it")
    func checkAnswersWithTheRuntimesWords() async throws {
        for message in ["every admission waiting for the checks was cancelled", "the admission was cancelled before its checks answered"] {
            let check = CountingAdmissionCheck { _ in .unavailable(message) }
            let manager = manager(check)
            let ran = Recorder<String>()
            let (task, ended) = admission(manager, ran: ran, "admission")
            defer { task.cancel() }
            #expect(await eventually { ended.count == 1 })
            #expect(ended.all == [AdmissionError(account: alice, result: .failed, cause: .unavailable(message))])
            #expect(check.runs.count == 1 && ran.count == 0)
        }
    }
}
