import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// A scheduler driven by the test: nothing runs until ``fire(_:)``.
final class ManualScheduler: EnrollmentScheduler {
    final class Work: ScheduledWork {
        let seconds: TimeInterval
        let body: @Sendable () -> Void
        let canceled = LockedValue(false)
        init(seconds: TimeInterval, body: @escaping @Sendable () -> Void) {
            self.seconds = seconds
            self.body = body
        }
        func cancel() { canceled.withLock { $0 = true } }
        var isCanceled: Bool { canceled.withLock { $0 } }
    }

    private let scheduled = LockedValue<[Work]>([])

    func schedule(after seconds: TimeInterval, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let item = Work(seconds: seconds, body: work)
        scheduled.withLock { $0.append(item) }
        return item
    }

    /// The live (not cancelled) work, in scheduling order.
    var pending: [Work] { scheduled.withLock { $0 }.filter { !$0.isCanceled } }

    /// Runs the live work scheduled after `seconds`, as if that much time passed.
    func fire(after seconds: TimeInterval) {
        let due = scheduled.withLock { items in
            let due = items.filter { !$0.isCanceled && $0.seconds == seconds }
            items.removeAll { item in due.contains { $0 === item } }
            return due
        }
        for work in due { work.body() }
    }
}

/// A service answering from a script, per operation; the default answers are successes.
final class ScriptedService: EnrollmentService {
    let enrollAnswers = LockedValue<[EnrollmentStatusCode]>([])
    let checkInAnswers = LockedValue<[EnrollmentStatusCode]>([])
    let calls = Recorder<String>()

    func enroll(_ account: Identity) async -> EnrollmentServiceResponse {
        calls.append("enroll \(account.name)")
        return EnrollmentServiceResponse(enrollAnswers.withLock { $0.isEmpty ? .newPoliciesReceived : $0.removeFirst() })
    }

    func checkIn(_ account: Identity) async -> EnrollmentServiceResponse {
        calls.append("checkIn \(account.name)")
        return EnrollmentServiceResponse(checkInAnswers.withLock { $0.isEmpty ? .policiesHaveNotChanged : $0.removeFirst() })
    }

    func unenroll(_ account: Identity) async -> EnrollmentServiceResponse {
        calls.append("unenroll \(account.name)")
        return EnrollmentServiceResponse(.unenrollmentSuccess)
    }
}

final class RecordingEnrollmentDelegate: EnrollmentDelegate {
    let log = Recorder<String>()
    func enrollmentRequest(with status: EnrollmentStatus) { log.append("enroll \(status.identity.name) \(status.statusCode.rawValue)") }
    func policyRequest(with status: EnrollmentStatus) { log.append("policy \(status.identity.name) \(status.statusCode.rawValue)") }
    func unenrollRequest(with status: EnrollmentStatus) { log.append("unenroll \(status.identity.name) \(status.statusCode.rawValue)") }
}

struct EnrollmentFixture {
    let policy: PolicyManager
    let service = ScriptedService()
    let scheduler = ManualScheduler()
    let delegate = RecordingEnrollmentDelegate()
    let enrollment: EnrollmentManager

    init(settings: RuntimeSettings = RuntimeSettings()) {
        policy = PolicyManager(settings: settings)
        enrollment = EnrollmentManager(policyManager: policy, service: service, scheduler: scheduler)
        enrollment.delegate = delegate
    }
}

@Suite("EnrollmentManager: transitions and status codes")
struct EnrollmentTests {
    @Test("enroll: registered, enrolled, primary user, process identity (single mode), refresh every 8 h")
    func enroll() async {
        let fixture = EnrollmentFixture()
        let status = await fixture.enrollment.registerAndEnrollAccount(alice)
        #expect(status.statusCode == .newPoliciesReceived && status.didSucceed)
        #expect(fixture.enrollment.registeredAccounts == [alice])
        #expect(fixture.enrollment.enrolledAccount == alice)
        #expect(fixture.policy.primaryUser == alice)
        #expect(fixture.policy.processIdentity == alice)
        #expect(fixture.policy.isIdentityManaged(alice))
        #expect(fixture.scheduler.pending.map(\.seconds) == [28_800])
        #expect(fixture.delegate.log.all == ["enroll alice@contoso.com 100"])
    }

    @Test("a tenant and object ID given to an enrollment the service refuses are not kept; an earlier registration is put back")
    func refusedEnrollmentKeepsNoRegistration() async {
        let fixture = EnrollmentFixture()
        fixture.service.enrollAnswers.withLock { $0 = [.notEmmAccount] }
        let status = await fixture.enrollment.registerAndEnrollAccount(alice, tenantID: "fabrikam-tid", objectID: "0001")
        #expect(status.statusCode == .notEmmAccount)
        #expect(fixture.policy.tenant(for: alice) == "contoso.com")
        #expect(fixture.policy.accountInfo(for: alice) == nil)
        #expect(fixture.policy.account(forObjectID: "0001") == nil)

        fixture.policy.registerAccount(bob, tenantID: "contoso-tid", objectID: "0002")
        fixture.service.enrollAnswers.withLock { $0 = [.notEmmAccount] }
        _ = await fixture.enrollment.registerAndEnrollAccount(bob, tenantID: "fabrikam-tid", objectID: "0003")
        #expect(fixture.policy.accountInfo(for: bob) == AccountInfo(identity: bob, tenantID: "contoso-tid", objectID: "0002"))
        #expect(fixture.policy.account(forObjectID: "0002") == bob)
        #expect(fixture.policy.account(forObjectID: "0003") == nil)
    }

    @Test("an enrollment that will be retried, or succeeds, keeps the tenant it was given")
    func retriedEnrollmentKeepsRegistration() async {
        let fixture = EnrollmentFixture()
        fixture.service.enrollAnswers.withLock { $0 = [.enrollmentEndPointNetworkFailure] }
        _ = await fixture.enrollment.registerAndEnrollAccount(alice, tenantID: "fabrikam-tid")
        #expect(fixture.policy.tenant(for: alice) == "fabrikam-tid")
        _ = await fixture.enrollment.registerAndEnrollAccount(bob, tenantID: "contoso-tid")
        #expect(fixture.policy.tenant(for: bob) == "contoso-tid")
    }

    @Test("an account the service wants wiped is refused from the service's answer on, not from when the wipe starts")
    func wipeAnswerBlocksAtOnce() async throws {
        final class GatedUnenroll: EnrollmentService {
            let gate = Gate()
            let enrollAnswer: EnrollmentStatusCode
            init(enrollAnswer: EnrollmentStatusCode) { self.enrollAnswer = enrollAnswer }
            func enroll(_ account: Identity) async -> EnrollmentServiceResponse { EnrollmentServiceResponse(enrollAnswer) }
            func checkIn(_ account: Identity) async -> EnrollmentServiceResponse { EnrollmentServiceResponse(.wipeReceived) }
            func unenroll(_ account: Identity) async -> EnrollmentServiceResponse {
                await gate.wait()
                return EnrollmentServiceResponse(.unenrollmentSuccess)
            }
        }
        let policy = PolicyManager(settings: RuntimeSettings())
        let previouslyWiped = GatedUnenroll(enrollAnswer: .wipeReceived)
        let enrollment = EnrollmentManager(policyManager: policy, service: previouslyWiped, scheduler: ManualScheduler())
        _ = await policy.wipeData(forAccount: alice)
        let enrolling = Task { await enrollment.registerAndEnrollAccount(alice) }
        #expect(await eventually { previouslyWiped.gate.entered == 1 })
        #expect(policy.blockReason(for: alice) == .wiped)
        await #expect(throws: AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.wiped))) {
            try await policy.withAdmittedIdentity(alice) {}
        }
        previouslyWiped.gate.open()
        _ = await enrolling.value
        #expect(policy.blockReason(for: alice) == .wiped)

        // A check-in answering "wipe": refused while the service hears of the unenrolment.
        let checkedIn = GatedUnenroll(enrollAnswer: .newPoliciesReceived)
        let other = EnrollmentManager(policyManager: policy, service: checkedIn, scheduler: ManualScheduler())
        _ = await other.registerAndEnrollAccount(bob)
        let checking = Task { await other.refreshPolicy(for: bob) }
        #expect(await eventually { checkedIn.gate.entered == 1 })
        await #expect(throws: AdmissionError(account: bob, result: .notAllowed, cause: .blocked(.wiped))) {
            try await policy.withAdmittedIdentity(bob) {}
        }
        checkedIn.gate.open()
        _ = await checking.value
    }

    @Test("refusals before the service is asked", arguments: [
        (Identity.unmanaged, EnrollmentStatusCode.nilAccount),
        (carol, .notEmmAccount),
    ])
    func refusals(account: Identity, code: EnrollmentStatusCode) async {
        var settings = RuntimeSettings()
        settings.allowedAccounts = [alice, bob]
        let fixture = EnrollmentFixture(settings: settings)
        let status = await fixture.enrollment.registerAndEnrollAccount(account)
        #expect(status.statusCode == code && !status.didSucceed)
        #expect(fixture.enrollment.registeredAccounts.isEmpty)
        #expect(fixture.service.calls.count == 0)
    }

    @Test("one managed account (maxManagedAccounts = 1): the same again is 208, another is 227")
    func oneAccount() async {
        let fixture = EnrollmentFixture(settings: .singleManagedAccount)
        await fixture.enrollment.registerAndEnrollAccount(alice)
        #expect(await fixture.enrollment.registerAndEnrollAccount(alice).statusCode == .alreadyEnrolled)
        #expect(await fixture.enrollment.registerAndEnrollAccount(bob).statusCode == .singleManagedAccountMode)
        #expect(fixture.enrollment.registeredAccounts == [alice])
        #expect(fixture.enrollment.enrolledAccount == alice)
    }

    @Test("every failure code: retried every 24 h when retryable, deregistered when the account must be removed",
          arguments: EnrollmentStatusCode.allCases.filter { !$0.isSuccess })
    func failure(code: EnrollmentStatusCode) async {
        let fixture = EnrollmentFixture()
        fixture.service.enrollAnswers.withLock { $0 = [code] }
        let status = await fixture.enrollment.registerAndEnrollAccount(alice)
        #expect(status.statusCode == code && !status.didSucceed)
        #expect(fixture.enrollment.enrolledAccount == nil)
        #expect(fixture.policy.primaryUser == nil)
        #expect(fixture.enrollment.registeredAccounts == (code.requiresAccountRemoval ? [] : [alice]))
        #expect(fixture.scheduler.pending.map(\.seconds) == (code.isRetryable ? [86_400] : []))
        #expect(fixture.delegate.log.all == ["enroll alice@contoso.com \(code.rawValue)"])
    }

    @Test("every success code of enrollment enrolls the account", arguments: [
        EnrollmentStatusCode.newPoliciesReceived, .policiesHaveNotChanged, .noPolicyReceived,
    ])
    func successCodes(code: EnrollmentStatusCode) async {
        let fixture = EnrollmentFixture()
        fixture.service.enrollAnswers.withLock { $0 = [code] }
        #expect(await fixture.enrollment.registerAndEnrollAccount(alice).statusCode == code)
        #expect(fixture.enrollment.enrolledAccount == alice)
    }

    @Test("a retry fires on the interval and enrolls; a registered, not enrolled account is not switchable")
    func retry() async {
        let fixture = EnrollmentFixture()
        fixture.service.enrollAnswers.withLock { $0 = [.enrollmentEndPointNetworkFailure, .timeout] }
        await fixture.enrollment.registerAndEnrollAccount(bob)
        #expect(await fixture.policy.setUIPolicyIdentity(bob, for: "w") == .notAllowed)
        fixture.scheduler.fire(after: 86_400)
        #expect(await eventually { fixture.delegate.log.count == 2 })
        #expect(fixture.scheduler.pending.map(\.seconds) == [86_400])
        fixture.scheduler.fire(after: 86_400)
        // The account is enrolled before the delegate hears of it: wait for both.
        #expect(await eventually { fixture.enrollment.enrolledAccount == bob && fixture.delegate.log.count == 3 })
        #expect(fixture.delegate.log.all == [
            "enroll bob@contoso.com 205", "enroll bob@contoso.com 216", "enroll bob@contoso.com 100",
        ])
        #expect(await fixture.policy.setUIPolicyIdentity(bob, for: "w") == .success)
    }

    @Test("unenroll: 104, primary user cleared, refresh cancelled; an unknown account: 214")
    func unenroll() async {
        let fixture = EnrollmentFixture()
        await fixture.enrollment.registerAndEnrollAccount(alice)
        let status = await fixture.enrollment.deRegisterAndUnenrollAccount(alice, withWipe: false)
        #expect(status.statusCode == .unenrollmentSuccess)
        #expect(fixture.enrollment.enrolledAccount == nil && fixture.enrollment.registeredAccounts.isEmpty)
        #expect(fixture.policy.primaryUser == nil && fixture.policy.processIdentity == nil)
        #expect(fixture.scheduler.pending.isEmpty)
        #expect(await fixture.enrollment.deRegisterAndUnenrollAccount(alice, withWipe: false).statusCode == .notEnrolledAccount)
        #expect(fixture.service.calls.all == ["enroll alice@contoso.com", "unenroll alice@contoso.com"])
        // After unenrolling, another account may enroll.
        #expect(await fixture.enrollment.registerAndEnrollAccount(bob).statusCode == .newPoliciesReceived)
    }

    @Test("unenrolling with a wipe that does not finish answers 215, never 104")
    func unenrollWithUnfinishedWipe() async {
        let fixture = EnrollmentFixture()
        fixture.policy.keyStore = UndestroyableKeyStore()
        await fixture.enrollment.registerAndEnrollAccount(alice)
        let status = await fixture.enrollment.deRegisterAndUnenrollAccount(alice, withWipe: true)
        #expect(status.statusCode == .failedToClearMamData)
        #expect(status.errorString?.contains("keys cannot be destroyed") == true)
        #expect(fixture.enrollment.enrolledAccount == nil)
        #expect(fixture.delegate.log.all.last == "unenroll alice@contoso.com 215")
    }

    @Test("deregistering an account waiting for a retry cancels the retry")
    func deregisterPending() async {
        let fixture = EnrollmentFixture()
        fixture.service.enrollAnswers.withLock { $0 = [.authRequired] }
        await fixture.enrollment.registerAndEnrollAccount(alice)
        #expect(await fixture.enrollment.deRegisterAndUnenrollAccount(alice, withWipe: false).statusCode == .unenrollmentSuccess)
        #expect(fixture.scheduler.pending.isEmpty)
        #expect(!fixture.service.calls.all.contains("unenroll alice@contoso.com"))
    }

    @Test("check-ins: 100 posts policyDidChange; 101 and 103 change nothing; 102 wipes and unenrolls")
    func checkIns() async {
        let fixture = EnrollmentFixture()
        await fixture.enrollment.registerAndEnrollAccount(alice)
        let events = fixture.policy.events
        fixture.service.checkInAnswers.withLock { $0 = [.newPoliciesReceived, .policiesHaveNotChanged, .noPolicyReceived, .wipeReceived] }
        #expect(await fixture.enrollment.refreshPolicy()?.statusCode == .newPoliciesReceived)
        var iterator = events.makeAsyncIterator()
        var sawChange = false
        while let event = await iterator.next() {
            if event == .policyDidChange { sawChange = true; break }
        }
        #expect(sawChange)
        #expect(await fixture.enrollment.refreshPolicy()?.statusCode == .policiesHaveNotChanged)
        fixture.scheduler.fire(after: 28_800)   // the scheduled check-in
        #expect(await eventually { fixture.delegate.log.all.contains("policy alice@contoso.com 103") })
        #expect(await fixture.enrollment.refreshPolicy()?.statusCode == .wipeReceived)
        #expect(fixture.enrollment.enrolledAccount == nil)
        #expect(fixture.delegate.log.all.last == "unenroll alice@contoso.com 104")
        #expect(await fixture.enrollment.refreshPolicy() == nil)
    }

    @Test("allowed accounts start from the settings and post a change notification")
    func allowedAccounts() async {
        var settings = RuntimeSettings()
        settings.allowedAccounts = [alice]
        let fixture = EnrollmentFixture(settings: settings)
        #expect(fixture.enrollment.allowedAccounts == [alice])
        let notified = Recorder<Bool>()
        let token = fixture.policy.notificationCenter.addObserver(forName: .allowedAccountsDidChange, object: nil, queue: nil) { _ in
            notified.append(true)
        }
        defer { fixture.policy.notificationCenter.removeObserver(token) }
        fixture.enrollment.allowedAccounts = [alice, bob]
        fixture.enrollment.allowedAccounts = [alice, bob]
        #expect(notified.count == 1)
        #expect(await fixture.enrollment.registerAndEnrollAccount(bob).statusCode == .newPoliciesReceived)
    }

    @Test("autoEnrollOnLaunch asks the delegate to add the first allowed account, then enrolls it")
    func autoEnroll() async {
        var settings = RuntimeSettings()
        settings.autoEnrollOnLaunch = true
        settings.allowedAccounts = [alice]
        let fixture = EnrollmentFixture(settings: settings)
        fixture.policy.delegate = ClosureDelegate(onAdd: { _, answer in answer(.success) })
        #expect(await fixture.enrollment.start()?.statusCode == .newPoliciesReceived)
        #expect(fixture.policy.primaryUser == alice)
        #expect(await fixture.enrollment.start() == nil)
    }

    @Test("one managed account (maxManagedAccounts = 1): of concurrent enrollments, exactly one is enrolled")
    func concurrentEnrollments() async {
        let fixture = EnrollmentFixture(settings: .singleManagedAccount)
        let accounts = (0..<16).map { Identity("user\($0)@contoso.com") }
        let statuses = await withTaskGroup(of: EnrollmentStatus.self) { group in
            for account in accounts { group.addTask { await fixture.enrollment.registerAndEnrollAccount(account) } }
            return await group.reduce(into: [EnrollmentStatus]()) { $0.append($1) }
        }
        #expect(statuses.filter(\.didSucceed).count == 1)
        #expect(statuses.filter { !$0.didSucceed }.allSatisfy { $0.statusCode == .singleManagedAccountMode })
        let enrolled = statuses.first(where: \.didSucceed)?.identity
        #expect(fixture.enrollment.enrolledAccount == enrolled)
        #expect(fixture.enrollment.registeredAccounts == enrolled.map { [$0] })
    }

    @Test("LocalEnrollmentService answers from the policy source")
    func localService() async {
        let source = StaticPolicySource([alice: Policy(identity: nil)])
        let service = LocalEnrollmentService(policySource: source)
        #expect(await service.enroll(alice).statusCode == .newPoliciesReceived)
        #expect(await service.enroll(bob).statusCode == .noPolicyReceived)
        #expect(await service.checkIn(alice).statusCode == .policiesHaveNotChanged)
        #expect(await service.unenroll(alice).statusCode == .unenrollmentSuccess)
    }
}

/// A key store whose keys cannot be destroyed: a wipe through it does not finish.
private struct UndestroyableKeyStore: KeyStore {
    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        throw .keyStoreUnavailable(reason: "no keys here")
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        throw .keyStoreUnavailable(reason: "no keys here")
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        throw .keyStoreUnavailable(reason: "no keys here")
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        throw .keyStoreUnavailable(reason: "keys cannot be destroyed")
    }
}
