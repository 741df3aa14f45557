import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// Records what a manager tells its observer, in order.
final class RecordingObserver: PolicyManagerObserver {
    enum Seen: Sendable, Equatable {
        case admitted(Identity, String)
        case refused(AdmissionError, String)
        case wiped(accounts: [Identity], tenant: TenantID?, leftovers: Int)
    }

    let seen = Recorder<Seen>()
    let durations = Recorder<Duration>()

    func didAdmit(_ account: Identity, reason: AdmissionReason) {
        seen.append(.admitted(account, reason.description))
    }

    func didRefuseAdmission(_ error: AdmissionError, reason: AdmissionReason) {
        seen.append(.refused(error, reason.description))
    }

    func didWipe(_ reports: [WipeReport], tenant: TenantID?, unreadable: [WipeLeftover], duration: Duration) {
        seen.append(.wiped(accounts: reports.map(\.account), tenant: tenant,
                           leftovers: reports.map(\.leftovers.count).reduce(unreadable.count, +)))
        durations.append(duration)
    }
}

/// An observer that implements nothing: every method has a default.
struct SilentObserver: PolicyManagerObserver {}

@Suite("PolicyManager's observer: admissions and wipes, once each")
struct PolicyManagerObserverTests {
    @Test("each admission is reported once, before the operation runs, whether the checks ran, were cached or joined")
    func admissionsOnce() async throws {
        let check = CountingAdmissionCheck()
        let manager = admissionManager(check)
        let observer = RecordingObserver()
        manager.observer = observer
        let seenBeforeOperation = try await manager.withAdmittedIdentity(alice, reason: "GET /a") { observer.seen.count }
        #expect(seenBeforeOperation == 1)
        try await manager.withAdmittedIdentity(alice, reason: "GET /b") {}     // a cached pass
        try await manager.withAdmittedIdentity(dave, reason: "GET /c") {}      // unmanaged: no checks
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { try await manager.withAdmittedIdentity(bob, reason: "GET /d") {} } }
            try await group.waitForAll()
        }
        #expect(observer.seen.all.filter { $0 == .admitted(alice, "GET /a") }.count == 1)
        #expect(observer.seen.all.filter { $0 == .admitted(alice, "GET /b") }.count == 1)
        #expect(observer.seen.all.filter { $0 == .admitted(dave, "GET /c") }.count == 1)
        #expect(observer.seen.all.filter { $0 == .admitted(bob, "GET /d") }.count == 8)
        #expect(observer.seen.count == 11)
    }

    @Test("each refusal is reported once with the error the caller gets; the operation's own errors are not refusals")
    func refusalsOnce() async throws {
        let check = CountingAdmissionCheck { $0 == carol ? .deny("revoked") : .admit }
        let manager = admissionManager(check)
        let observer = RecordingObserver()
        manager.observer = observer
        manager.blockAccount(bob, reason: .clockedOut)
        var thrown: [AdmissionError] = []
        for account in [bob, carol, carol] {
            do { try await manager.withAdmittedIdentity(account, reason: "PUT /x") {} } catch let error as AdmissionError {
                thrown.append(error)
            }
        }
        // The operation throws an AdmissionError of its own: admitted, and not reported as a refusal.
        let inner = AdmissionError(account: alice, result: .failed, cause: .unavailable("inner"))
        await #expect(throws: inner) { try await manager.withAdmittedIdentity(alice, reason: "GET /y") { throw inner } }
        #expect(thrown.count == 3)
        #expect(observer.seen.all == thrown.map { .refused($0, "PUT /x") } + [.admitted(alice, "GET /y")])
        #expect(thrown.map(\.cause) == [.blocked(.clockedOut), .denied("revoked"), .blocked(.admissionCheckFailed)])
    }

    @Test("the completion-handler form is observed too")
    func completionHandlerForm() async {
        let manager = admissionManager(CountingAdmissionCheck())
        let observer = RecordingObserver()
        manager.observer = observer
        manager.blockAccount(bob, reason: .blockedByAdministrator)
        for account in [alice, bob] {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                manager.withAdmittedIdentity(account, operation: {}, completionHandler: { _ in done.resume() })
            }
        }
        #expect(observer.seen.all == [
            .admitted(alice, "request"),
            .refused(AdmissionError(account: bob, result: .notAllowed, cause: .blocked(.blockedByAdministrator)), "request"),
        ])
    }

    @Test("a wipe is reported once, after its last step, with its reports and a duration; a tenant wipe once in all")
    func wipes() async throws {
        let f = try WipeFixture()
        try f.write("a1.txt", as: alice, "alice one")
        try f.write("b1.txt", as: bob, "bob one")
        let observer = RecordingObserver()
        f.manager.observer = observer
        let completions = Recorder<Identity>()
        let center = f.manager.notificationCenter
        let token = center.addObserver(forName: .wipeDidComplete, object: nil, queue: nil) { note in
            if let name = note.userInfo?["account"] as? String { completions.append(Identity(name)) }
        }
        defer { center.removeObserver(token) }
        let report = await f.manager.wipeData(forAccount: alice)
        #expect(observer.seen.all == [.wiped(accounts: [alice], tenant: nil, leftovers: 0)])
        #expect(report.isComplete)
        #expect(completions.all == [alice])
        let tenantReport = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(observer.seen.all.last == .wiped(accounts: tenantReport.accounts.map(\.account), tenant: "contoso.com", leftovers: 0))
        #expect(tenantReport.accounts.map(\.account).contains(bob))
        #expect(observer.seen.count == 2)
        #expect(observer.durations.all.allSatisfy { $0 >= .zero })
    }

    @Test("no observer, or one that implements nothing: the same outcomes")
    func defaults() async throws {
        let manager = admissionManager(CountingAdmissionCheck())
        #expect(manager.observer == nil)
        manager.observer = SilentObserver()
        #expect(manager.observer is SilentObserver)
        try await manager.withAdmittedIdentity(alice) {}
        manager.observer = nil
        try await manager.withAdmittedIdentity(alice) {}
        #expect(manager.observer == nil)
    }
}
