import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// A delegate that records its blockAccount calls (and the identity they ran under) and answers success.
final class BlockRecordingPolicyDelegate: PolicyDelegate {
    let blocks = Recorder<String>()

    func blockAccount(
        _ account: Identity, reason: BlockAccountReason, window: WindowID?,
        completionHandler: @escaping @Sendable (BlockAccountResult) -> Void
    ) {
        blocks.append("\(account.name) \(reason) as:\(IdentityContext.currentThreadIdentity?.name ?? "none")")
        completionHandler(.success)
    }

    func restartApplication() -> Bool { true }
}

/// A check that runs until its task is cancelled, recording that it started.
func checkUntilCancelled(_ started: Recorder<Bool>) -> ClosureConditionalLaunchCheck {
    ClosureConditionalLaunchCheck { _, _ in
        started.append(true)
        try? await Task.sleep(for: .seconds(3_600))
        return .passes
    }
}

/// A service or app owns the managers' background work through their `run()`: nothing starts in an
/// initializer, and when `run()` ends nothing the manager started before is left in flight.
@Suite("Background work: owned by run(), started by nobody else")
struct BackgroundWorkTests {
    let window: WindowID = "w"

    // MARK: Polling

    @Test("the initializer starts nothing: a policy directory changed on disk is read by run(), and not before")
    func pollingBelongsToRun() async throws {
        let directory = try TemporaryDirectory()
        var settings = RuntimeSettings()
        settings.policyDirectory = directory.path
        settings.policyPollInterval = 0.02
        let manager = PolicyManager(settings: settings)
        try directory.write("alice.json", DirectoryPolicySourceTests.aliceDocument)
        try await Task.sleep(for: .milliseconds(200))
        #expect(!manager.isManaged(alice))
        let work = Task { await manager.run() }
        #expect(await eventually { manager.isManaged(alice) })
        work.cancel()
        await work.value
        try directory.write("alice.json", DirectoryPolicySourceTests.aliceDocument.replacingOccurrences(of: "alice@", with: "bob@"))
        try await Task.sleep(for: .milliseconds(200))
        #expect(manager.isManaged(alice) && !manager.isManaged(bob))
    }

    @Test("a failing read does not end run(): the policies in force stay, the next pass reads the fixed directory")
    func failingReadKeepsPolling() async throws {
        let directory = try TemporaryDirectory()
        try directory.write("alice.json", DirectoryPolicySourceTests.aliceDocument)
        var settings = RuntimeSettings()
        settings.policyDirectory = directory.path
        settings.policyPollInterval = 0.02
        let manager = PolicyManager(settings: settings)
        #expect(manager.isManaged(alice))
        let work = Task { await manager.run() }
        defer { work.cancel() }
        try directory.write("alice.json", "{ not json")
        #expect(await eventually { !manager.policyErrors.isEmpty })
        #expect(manager.isManaged(alice))
        try directory.write("alice.json", DirectoryPolicySourceTests.aliceDocument)
        #expect(await eventually { manager.policyErrors.isEmpty })
    }

    @Test("a poll interval that is NaN, negative or zero polls every millisecond instead of trapping",
          arguments: [Double.nan, -1, 0])
    func oddPollInterval(seconds: Double) async throws {
        let directory = try TemporaryDirectory()
        var settings = RuntimeSettings()
        settings.policyDirectory = directory.path
        settings.policyPollInterval = seconds
        let manager = PolicyManager(settings: settings)
        let work = Task { await manager.run() }
        try directory.write("alice.json", DirectoryPolicySourceTests.aliceDocument)
        #expect(await eventually { manager.isManaged(alice) })
        work.cancel()
        await work.value
    }

    @Test("run() cancelled before it starts, and two run()s at once, all return")
    func runEdgeCases() async {
        let manager = makeManager()
        let early = Task { await manager.run() }
        early.cancel()
        await early.value
        let first = Task { await manager.run() }
        let second = Task { await manager.run() }
        try? await Task.sleep(for: .milliseconds(20))
        first.cancel()
        await first.value
        second.cancel()
        await second.value
        #expect(manager.backgroundWork.count == 0)
    }

    // MARK: Identity switches

    @Test("ending run() ends a switch whose checks are in flight: canceled, once, not applied, nobody blocked")
    func endingRunCancelsSwitch() async {
        let started = Recorder<Bool>()
        let manager = makeManager(checks: [checkUntilCancelled(started)])
        let work = Task { await manager.run() }
        let results = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: window) { results.append($0) }
        #expect(await eventually { started.count == 1 })
        work.cancel()
        await work.value
        #expect(manager.backgroundWork.count == 0)
        #expect(await eventually { results.count == 1 })
        try? await Task.sleep(for: .milliseconds(20))
        #expect(results.all == [.canceled])
        #expect(manager.uiPolicyIdentity(for: window) == nil)
        #expect(manager.blockedAccounts.isEmpty)
    }

    @Test("a check that decides after run() ended it is ignored, as for a superseded switch: nothing set, nobody blocked")
    func checkDecidingAfterTheEndIsIgnored() async {
        let gate = Gate()
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await gate.wait()
            return .fails
        }])
        let work = Task { await manager.run() }
        let results = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: window) { results.append($0) }
        #expect(await eventually { gate.entered == 1 })
        work.cancel()
        #expect(await eventually { results.count == 1 })
        gate.open()
        await work.value
        #expect(results.all == [.canceled])
        #expect(manager.uiPolicyIdentity(for: window) == nil)
        #expect(manager.blockedAccounts.isEmpty)
    }

    @Test("a switch superseded while run() ends: each completion exactly once, the older canceled")
    func supersededWhileRunEnds() async {
        for _ in 0..<50 {
            let gate = Gate()
            let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
                await gate.wait()
                return .passes
            }])
            let work = Task { await manager.run() }
            let first = Recorder<SwitchIdentityResult>()
            let second = Recorder<SwitchIdentityResult>()
            manager.setUIPolicyIdentity(alice, for: window) { first.append($0) }
            work.cancel()
            manager.setUIPolicyIdentity(alice, for: window) { second.append($0) }
            gate.open()
            await work.value
            #expect(await eventually { first.count == 1 && second.count == 1 })
            try? await Task.sleep(for: .milliseconds(5))
            #expect(first.all == [.canceled])
            #expect(second.count == 1)
            #expect(manager.blockedAccounts.isEmpty)
            #expect(manager.uiPolicyIdentity(for: window) == (second.all == [.success] ? alice : nil))
        }
    }

    // MARK: Delegate calls and admissions: waited for, never interrupted

    @Test("an account blocked while run() ends is still reported to the delegate", arguments: 0..<20)
    func blockDuringShutdownReachesDelegate(round: Int) async {
        var settings = RuntimeSettings()
        settings.delegateTimeout = 3_600
        let manager = makeManager(settings: settings)
        let delegate = BlockRecordingPolicyDelegate()
        manager.delegate = delegate
        let work = Task { await manager.run() }
        try? await Task.sleep(for: .milliseconds(round % 3))
        work.cancel()
        manager.block(bob, reason: .blockedByAdministrator, window: nil)
        await work.value
        #expect(manager.blockReason(for: bob) == .blockedByAdministrator)
        #expect(await eventually { delegate.blocks.count == 1 })
        #expect(delegate.blocks.all == ["bob@contoso.com blockedByAdministrator as:none"])
    }

    @Test("ending run() waits for a delegate call in flight: its answer reaches the completion handler")
    func endingRunWaitsForDelegateCall() async {
        let asked = Recorder<Identity>()
        let manager = makeManager()
        manager.delegate = ClosureDelegate(onAdd: { identity, answer in
            asked.append(identity)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { answer(.success) }
        })
        let work = Task { await manager.run() }
        let results = Recorder<AddIdentityResult>()
        manager.addIdentity(bob) { results.append($0) }
        #expect(await eventually { asked.count == 1 })
        work.cancel()
        await work.value
        #expect(manager.backgroundWork.count == 0)
        #expect(await eventually { results.count == 1 })
        #expect(results.all == [.success])
    }

    @Test("ending run() during an admission's checks: admitted as decided, a joined caller too, nobody blocked, observer hears it once")
    func endingRunWaitsForAdmission() async throws {
        struct Log: PolicyManagerObserver {
            let log: Recorder<String>
            func didAdmit(_ account: Identity, reason: AdmissionReason) { log.append("admit") }
            func didRefuseAdmission(_ error: AdmissionError, reason: AdmissionReason) { log.append("refuse") }
        }
        let started = Gate()
        let heard = Recorder<String>()
        let manager = makeManager()
        manager.observer = Log(log: heard)
        manager.admissionChecks = [ClosureAdmissionCheck { _, _ in
            started.open()
            // A lookup that maps its errors (a CancellationError included) to a denial.
            do {
                try await Task.sleep(for: .milliseconds(200))
                return .admit
            } catch {
                return .deny("directory lookup failed: \(error)")
            }
        }]
        let work = Task { await manager.run() }
        let outcomes = Recorder<String>()
        let ran = Recorder<Identity?>()
        manager.withAdmittedIdentity(alice, operation: { ran.append(IdentityContext.currentThreadIdentity) }) { error in
            outcomes.append(error.map { "refused \($0.result)" } ?? "admitted")
        }
        await started.wait()
        let joined = Task { () -> String in
            do {
                try await manager.withAdmittedIdentity(alice) {}
                return "admitted"
            } catch {
                return "refused \(error)"
            }
        }
        try await Task.sleep(for: .milliseconds(20))
        work.cancel()
        await work.value
        #expect(await joined.value == "admitted")
        #expect(await eventually { outcomes.count == 1 && ran.count == 1 })
        #expect(outcomes.all == ["admitted"])
        #expect(ran.all == [alice])
        #expect(manager.blockReason(for: alice) == .notBlocked)
        #expect(heard.all.filter { $0 == "refuse" }.isEmpty)
    }

    @Test("work the manager starts runs under no identity, whatever identity the call that caused it had")
    func backgroundWorkHasNoIdentity() async {
        let seen = Recorder<String>()
        var settings = RuntimeSettings()
        settings.delegateTimeout = 3_600
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { identity, _ in
            seen.append("check \(identity.name) as:\(IdentityContext.currentThreadIdentity?.name ?? "none")")
            return .fails
        }], settings: settings)
        let delegate = BlockRecordingPolicyDelegate()
        manager.delegate = delegate
        let done = Recorder<String>()
        await IdentityContext.withThreadIdentity(carol) {
            await Task {
                manager.setUIPolicyIdentity(alice, for: window) { _ in
                    done.append("switch as:\(IdentityContext.currentThreadIdentity?.name ?? "none")")
                }
                manager.withAdmittedIdentity(dave, operation: {}) { _ in
                    done.append("admission as:\(IdentityContext.currentThreadIdentity?.name ?? "none")")
                }
            }.value
        }
        #expect(await eventually { done.count == 2 && delegate.blocks.count == 1 })
        #expect(seen.all == ["check alice@contoso.com as:alice@contoso.com"])
        #expect(delegate.blocks.all == ["alice@contoso.com conditionalLaunchBlocked as:none"])
        #expect(Set(done.all) == ["switch as:none", "admission as:none"])
    }

    @Test("many callers while run() ends: run() returns, each completion handler runs once, nothing is left")
    func manyCallersWhileRunEnds() async {
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            try? await Task.sleep(for: .milliseconds(Int.random(in: 0...3)))
            return .passes
        }])
        manager.admissionChecks = [ClosureAdmissionCheck { _, _ in
            try? await Task.sleep(for: .milliseconds(Int.random(in: 0...3)))
            return .admit
        }]
        manager.delegate = ClosureDelegate(onAdd: { _, answer in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int.random(in: 0...3))) { answer(.success) }
        })
        let counts = LockedValue<[Int: Int]>([:])
        let calls = 600
        let work = Task { await manager.run() }
        let callers = Task.detached {
            DispatchQueue.concurrentPerform(iterations: calls) { index in
                let record: @Sendable () -> Void = { counts.withLock { $0[index, default: 0] += 1 } }
                switch index % 3 {
                case 0: manager.setUIPolicyIdentity(index % 2 == 0 ? alice : nil, for: WindowID("w\(index % 7)")) { _ in record() }
                case 1: manager.addIdentity(bob) { _ in record() }
                default: manager.withAdmittedIdentity(alice, operation: {}) { _ in record() }
                }
            }
        }
        try? await Task.sleep(for: .milliseconds(5))
        work.cancel()
        await work.value
        await callers.value
        #expect(await eventually { counts.withLock { $0.count } == calls && manager.backgroundWork.count == 0 })
        try? await Task.sleep(for: .milliseconds(100))
        #expect(counts.withLock { $0.values.allSatisfy { $0 == 1 } })
        #expect(manager.blockedAccounts.isEmpty)
    }

    @Test("the manager is released once its background work ended")
    func managerReleased() async {
        final class WeakBox: @unchecked Sendable { weak var manager: PolicyManager? }
        let box = WeakBox()
        let done = Recorder<Int>()
        do {
            let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in .passes }])
            manager.delegate = ClosureDelegate(onAdd: { _, answer in answer(.success) })
            box.manager = manager
            let work = Task { await manager.run() }
            manager.setUIPolicyIdentity(alice, for: window) { _ in done.append(1) }
            manager.addIdentity(bob) { _ in done.append(2) }
            manager.withAdmittedIdentity(alice, operation: {}) { _ in done.append(3) }
            #expect(await eventually { done.count == 3 })
            work.cancel()
            await work.value
        }
        #expect(await eventually(within: 2) { box.manager == nil })
    }

    // MARK: Enrollment

    @Test("ending EnrollmentManager.run() calls off every scheduled retry and check-in; operations afterwards schedule anew")
    func endingEnrollmentRunCallsOffSchedule() async {
        let fixture = EnrollmentFixture()
        await fixture.enrollment.registerAndEnrollAccount(alice)
        fixture.service.enrollAnswers.withLock { $0 = [.enrollmentEndPointNetworkFailure] }
        await fixture.enrollment.registerAndEnrollAccount(bob)
        #expect(fixture.scheduler.pending.count == 2)
        let work = Task { await fixture.enrollment.run() }
        work.cancel()
        await work.value
        #expect(fixture.scheduler.pending.isEmpty)
        let calls = fixture.service.calls.all
        fixture.scheduler.fire(after: 86_400)
        try? await Task.sleep(for: .milliseconds(50))
        #expect(fixture.service.calls.all == calls)
        #expect(await fixture.enrollment.registerAndEnrollAccount(bob).statusCode == .newPoliciesReceived)
        #expect(fixture.scheduler.pending.map(\.seconds) == [28_800])
    }

    @Test("the next run() schedules again the check-ins and retries the last one called off")
    func nextRunResumesSchedule() async {
        let fixture = EnrollmentFixture()
        await fixture.enrollment.registerAndEnrollAccount(alice)
        fixture.service.enrollAnswers.withLock { $0 = [.enrollmentEndPointNetworkFailure] }
        await fixture.enrollment.registerAndEnrollAccount(bob)
        let first = Task { await fixture.enrollment.run() }
        first.cancel()
        await first.value
        #expect(fixture.scheduler.pending.isEmpty)
        let second = Task { await fixture.enrollment.run() }
        defer { second.cancel() }
        #expect(await eventually { fixture.scheduler.pending.count == 2 })
        #expect(Set(fixture.scheduler.pending.map(\.seconds)) == [28_800, 86_400])
        fixture.scheduler.fire(after: 86_400)
        #expect(await eventually { fixture.enrollment.enrolledAccounts.contains(bob) })
    }

    @Test("a check-in already running when run() called it off does not schedule another after run() returned")
    func lateCheckInDoesNotOutliveRun() async {
        let service = ScriptedService()
        let scheduler = ManualScheduler()
        let enrollment = EnrollmentManager(policyManager: PolicyManager(settings: RuntimeSettings()), service: service, scheduler: scheduler)
        await enrollment.registerAndEnrollAccount(alice)
        let refresh = scheduler.pending[0]
        let work = Task { await enrollment.run() }
        work.cancel()
        await work.value
        #expect(scheduler.pending.isEmpty)
        // A dispatch item that was already executing when cancel() came goes on.
        refresh.body()
        try? await Task.sleep(for: .milliseconds(100))
        #expect(!service.calls.all.contains("checkIn alice@contoso.com"))
        #expect(scheduler.pending.isEmpty)
    }

    @Test("EnrollmentManager.run() ending while a check-in runs waits for it and leaves nothing scheduled")
    func enrollmentRunWaitsForCheckIn() async {
        final class GatedService: EnrollmentService {
            let gate = Gate()
            let cancelledSeen = Recorder<Bool>()
            func enroll(_ account: Identity) async -> EnrollmentServiceResponse { EnrollmentServiceResponse(.newPoliciesReceived) }
            func checkIn(_ account: Identity) async -> EnrollmentServiceResponse {
                await gate.wait()
                cancelledSeen.append(Task.isCancelled)
                return EnrollmentServiceResponse(.policiesHaveNotChanged)
            }
            func unenroll(_ account: Identity) async -> EnrollmentServiceResponse { EnrollmentServiceResponse(.unenrollmentSuccess) }
        }
        let service = GatedService()
        let scheduler = ManualScheduler()
        let enrollment = EnrollmentManager(policyManager: PolicyManager(settings: RuntimeSettings()), service: service, scheduler: scheduler)
        await enrollment.registerAndEnrollAccount(alice)
        let work = Task { await enrollment.run() }
        scheduler.fire(after: 28_800)
        #expect(await eventually { service.gate.entered == 1 })
        work.cancel()
        try? await Task.sleep(for: .milliseconds(20))
        service.gate.open()
        await work.value
        #expect(scheduler.pending.isEmpty)
        #expect(service.cancelledSeen.all == [false])
        #expect(enrollment.enrolledAccounts == [alice])
    }
}
