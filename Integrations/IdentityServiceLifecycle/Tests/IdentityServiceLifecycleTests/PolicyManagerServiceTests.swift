import Foundation
import IdentityPolicy
import IdentityRuntime
import IdentityServiceLifecycle
import Logging
import ServiceLifecycle
import Testing

let alice: Identity = "alice@contoso.com"

/// Values shared with the manager's tasks, behind a pthread lock (visible to ThreadSanitizer).
final class Shared<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func update<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
    var current: Value { update { $0 } }
}

/// Contoso's policy, counting the manager's reads.
final class CountingSource: PolicySource {
    let inner = StaticPolicySource(tenants: ["contoso.com": Policy(identity: nil, isFileEncryptionRequired: true)])
    let reloads = Shared(0)
    var policies: PolicySet { inner.policies }
    func setChangeHandler(_ handler: (@Sendable () -> Void)?) { inner.setChangeHandler(handler) }
    func reload(deadline: ContinuousClock.Instant) async throws(PolicyDocumentError) -> Bool {
        reloads.update { $0 += 1 }
        return false
    }
}

func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<3_000 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// A scheduler that never fires on its own: it records what was scheduled and whether it was called off.
final class RecordingScheduler: EnrollmentScheduler {
    final class Work: ScheduledWork {
        let canceled = Shared(false)
        func cancel() { canceled.update { $0 = true } }
    }

    let scheduled = Shared<[Work]>([])

    func schedule(after seconds: TimeInterval, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let item = Work()
        scheduled.update { $0.append(item) }
        return item
    }
}

@Suite("PolicyManagerService: a ServiceGroup owns the managers' background work")
struct PolicyManagerServiceTests {
    func manager(_ source: CountingSource) -> PolicyManager {
        var settings = RuntimeSettings()
        settings.policyPollInterval = 0.01
        let manager = PolicyManager(settings: settings, policySource: source)
        manager.registerAccount(alice)
        return manager
    }

    func group(_ services: [any Service]) -> ServiceGroup {
        ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            logger: Logger(label: "test")))
    }

    @Test("the group runs the polling until its graceful shutdown; nothing reads afterwards")
    func pollsUntilShutdown() async throws {
        let source = CountingSource()
        let policies = manager(source)
        try await Task.sleep(for: .milliseconds(100))
        #expect(source.reloads.current == 0)
        let group = group([PolicyManagerService(policies)])
        let running = Task { try await group.run() }
        #expect(await eventually { source.reloads.current >= 3 })
        await group.triggerGracefulShutdown()
        try await running.value
        let reads = source.reloads.current
        try await Task.sleep(for: .milliseconds(100))
        #expect(source.reloads.current == reads)
    }

    @Test("a switch whose checks run when the group shuts down ends canceled before the group returns")
    func shutdownEndsSwitch() async throws {
        let policies = manager(CountingSource())
        let entered = Shared(false)
        policies.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { _, _ in
            entered.update { $0 = true }
            try? await Task.sleep(for: .seconds(600))
            return .passes
        }]
        let group = group([PolicyManagerService(policies)])
        let running = Task { try await group.run() }
        let results = Shared<[SwitchIdentityResult]>([])
        policies.setUIPolicyIdentity(alice, for: "w") { result in results.update { $0.append(result) } }
        #expect(await eventually { entered.current })
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(results.current == [.canceled])
        #expect(policies.uiPolicyIdentity(for: "w") == nil)
        #expect(policies.blockedAccounts.isEmpty)
    }

    @Test("the enrollment manager beside it: its scheduled check-ins are called off at shutdown")
    func shutdownCallsOffEnrollment() async throws {
        let policies = manager(CountingSource())
        let service = LocalEnrollmentService(policySource: StaticPolicySource(
            tenants: ["contoso.com": Policy(identity: nil, isFileEncryptionRequired: true)]))
        let scheduler = RecordingScheduler()
        let enrollment = EnrollmentManager(policyManager: policies, service: service, scheduler: scheduler)
        #expect(await enrollment.registerAndEnrollAccount(alice).statusCode == .newPoliciesReceived)
        // The enrolled account's next check-in is scheduled.
        #expect(scheduler.scheduled.current.count == 1)
        #expect(scheduler.scheduled.current.allSatisfy { !$0.canceled.current })
        let group = group([PolicyManagerService(policies, enrollment: enrollment)])
        let running = Task { try await group.run() }
        try await Task.sleep(for: .milliseconds(50))
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(scheduler.scheduled.current.allSatisfy { $0.canceled.current })
        #expect(enrollment.enrolledAccount == alice)
    }
}
