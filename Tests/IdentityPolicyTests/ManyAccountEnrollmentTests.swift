import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("EnrollmentManager: many accounts, per-account status codes, retries and check-ins")
struct ManyAccountEnrollmentTests {
    @Test("three accounts enroll; the first is the primary user; each has its own check-in schedule")
    func threeAccounts() async {
        let fixture = EnrollmentFixture()
        for account in [alice, carol, frank] {
            #expect(await fixture.enrollment.registerAndEnrollAccount(account).didSucceed)
        }
        #expect(fixture.enrollment.enrolledAccounts == [alice, carol, frank])
        #expect(fixture.policy.enrolledAccounts == [alice, carol, frank])
        #expect(fixture.policy.managedAccounts == [alice, carol, frank])
        #expect(fixture.policy.primaryUser == alice)
        #expect(fixture.scheduler.pending.map(\.seconds) == [28_800, 28_800, 28_800])
        fixture.scheduler.fire(after: 28_800)
        #expect(await eventually { fixture.service.calls.all.filter { $0.hasPrefix("checkIn") }.count == 3 })
        #expect(Set(fixture.service.calls.all.filter { $0.hasPrefix("checkIn") }) ==
                ["checkIn alice@contoso.com", "checkIn carol@fabrikam.com", "checkIn frank@northwind.example"])
    }

    @Test("unenrolling one account leaves the others managed; unenrolling the primary user promotes the next")
    func unenrollOne() async {
        let fixture = EnrollmentFixture()
        for account in [alice, carol] { await fixture.enrollment.registerAndEnrollAccount(account) }
        #expect(await fixture.enrollment.deRegisterAndUnenrollAccount(alice, withWipe: false).statusCode == .unenrollmentSuccess)
        #expect(fixture.policy.managedAccounts == [carol])
        #expect(fixture.policy.primaryUser == carol)
        #expect(fixture.policy.processIdentity == carol)
        #expect(fixture.scheduler.pending.count == 1)
    }

    @Test("a retryable failure of one account is retried for that account only")
    func perAccountRetry() async {
        let fixture = EnrollmentFixture()
        fixture.service.enrollAnswers.withLock { $0 = [.internalError] }
        #expect(await fixture.enrollment.registerAndEnrollAccount(carol).statusCode == .internalError)
        #expect(await fixture.enrollment.registerAndEnrollAccount(alice).didSucceed)
        #expect(fixture.policy.managedAccounts == [alice])
        #expect(await fixture.policy.setUIPolicyIdentity(carol, for: "w") == .notAllowed)   // registered, enrolling
        fixture.scheduler.fire(after: 86_400)
        #expect(await eventually { fixture.policy.managedAccounts == [alice, carol] })
        // The account is enrolled before the delegate hears of it: wait for the report too.
        #expect(await eventually { fixture.delegate.log.all.contains("enroll carol@fabrikam.com 100") })
    }

    @Test("maxManagedAccounts = 2: a third enrollment is 227; unenrolling one makes room")
    func limitOfTwo() async {
        var settings = RuntimeSettings()
        settings.maxManagedAccounts = 2
        let fixture = EnrollmentFixture(settings: settings)
        #expect(await fixture.enrollment.registerAndEnrollAccount(alice).didSucceed)
        #expect(await fixture.enrollment.registerAndEnrollAccount(carol).didSucceed)
        let refused = await fixture.enrollment.registerAndEnrollAccount(frank)
        #expect(refused.statusCode == .singleManagedAccountMode)
        #expect(refused.errorString?.contains("at most 2") == true)
        await fixture.enrollment.deRegisterAndUnenrollAccount(alice, withWipe: false)
        #expect(await fixture.enrollment.registerAndEnrollAccount(frank).didSucceed)
        #expect(fixture.policy.managedAccounts == [carol, frank])
    }

    @Test("enrollment records the tenant ID and object ID it is given")
    func tenantAndObjectID() async {
        let fixture = EnrollmentFixture()
        await fixture.enrollment.registerAndEnrollAccount(alice, tenantID: "tenant-a", objectID: "oid-1")
        #expect(fixture.policy.tenant(for: alice) == "tenant-a")
        #expect(fixture.policy.account(forObjectID: "OID-1") == alice)
    }

    @Test("allowedAccounts is the policy manager's: it refuses enrollment and switches alike")
    func allowedAccounts() async {
        let fixture = EnrollmentFixture()
        let changes = Recorder<Bool>()
        let token = fixture.policy.notificationCenter.addObserver(forName: .allowedAccountsDidChange, object: fixture.policy, queue: nil) { _ in
            changes.append(true)
        }
        defer { fixture.policy.notificationCenter.removeObserver(token) }
        fixture.enrollment.allowedAccounts = [alice]
        #expect(fixture.policy.allowedAccounts == [alice])
        #expect(await fixture.enrollment.registerAndEnrollAccount(carol).statusCode == .notEmmAccount)
        #expect(await fixture.policy.setUIPolicyIdentity(carol, for: "w") == .notAllowed)
        #expect(await fixture.policy.setUIPolicyIdentity(.unmanaged, for: "w") == .success)
        #expect(changes.count == 1)
    }
}
