import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// A service or app owns the managers' background work through their `run()`: nothing starts in an
/// initializer, and the end of `run()` leaves nothing the manager started in flight.
@Suite("Background work: owned by run(), started by nobody else")
struct BackgroundWorkTests {
    let window: WindowID = "w"

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

    @Test("ending run() ends a switch whose checks are in flight: canceled, once, not applied, nobody blocked")
    func endingRunCancelsSwitch() async {
        let gate = Gate()
        let sawCancellation = Recorder<Bool>()
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await gate.wait()
            sawCancellation.append(Task.isCancelled)
            return .passes
        }])
        let work = Task { await manager.run() }
        let results = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: window) { results.append($0) }
        #expect(await eventually { gate.entered == 1 })
        work.cancel()
        gate.open()
        await work.value
        // run() returned: the switch has ended and its completion handler has run.
        #expect(results.all == [.canceled])
        #expect(sawCancellation.all == [true])
        #expect(manager.uiPolicyIdentity(for: window) == nil)
        #expect(manager.blockedAccounts.isEmpty)
        #expect(manager.backgroundWork.count == 0)
    }

    @Test("ending run() answers a delegate call awaited for a completion handler: failed, once, no restart asked")
    func endingRunAnswersDelegateCall() async {
        let asked = Recorder<Identity>()
        let restarts = Recorder<Bool>()
        var settings = RuntimeSettings()
        settings.delegateTimeout = 3_600
        let manager = makeManager(settings: settings)
        manager.delegate = ClosureDelegate(onAdd: { identity, _ in asked.append(identity) }, onRestart: {
            restarts.append(true)
            return true
        })
        let work = Task { await manager.run() }
        let results = Recorder<AddIdentityResult>()
        manager.addIdentity(bob) { results.append($0) }
        #expect(await eventually { asked.count == 1 })
        work.cancel()
        await work.value
        #expect(await eventually { results.count == 1 })
        #expect(results.all == [.failed])
        #expect(restarts.all.isEmpty)
        #expect(manager.backgroundWork.count == 0)
    }

    @Test("work the manager starts runs under no identity, whatever identity the call that caused it had")
    func backgroundWorkHasNoIdentity() async {
        let seen = Recorder<String>()
        let manager = makeManager()
        manager.delegate = ClosureDelegate(onAdd: { _, answer in
            seen.append(IdentityContext.currentThreadIdentity?.name ?? "none")
            answer(.success)
        })
        let results = Recorder<AddIdentityResult>()
        IdentityContext.withThreadIdentity(carol) {
            manager.addIdentity(bob) { results.append($0) }
        }
        #expect(await eventually { results.count == 1 })
        #expect(results.all == [.success])
        #expect(seen.all == ["none"])
    }

    @Test("an admission for a completion handler in flight when run() ends is refused, once; the operation never runs")
    func endingRunRefusesAdmission() async {
        let gate = Gate()
        let manager = makeManager()
        manager.admissionChecks = [ClosureAdmissionCheck { _, _ in
            await gate.wait()
            return .admit
        }]
        let work = Task { await manager.run() }
        let ran = Recorder<Bool>()
        let outcomes = Recorder<String>()
        manager.withAdmittedIdentity(alice, operation: { ran.append(true) }) { error in
            outcomes.append(error.map { "refused \($0.result)" } ?? "admitted")
        }
        #expect(await eventually { gate.entered == 1 })
        work.cancel()
        gate.open()
        await work.value
        #expect(await eventually { outcomes.count == 1 })
        #expect(outcomes.all == ["refused canceled"])
        #expect(ran.all.isEmpty)
    }

    @Test("ending EnrollmentManager.run() calls off every scheduled retry and check-in")
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
        // Operations afterwards schedule anew.
        #expect(await fixture.enrollment.registerAndEnrollAccount(bob).statusCode == .newPoliciesReceived)
        #expect(fixture.scheduler.pending.count == 1)
    }
}
