import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// A check that counts its runs, records the thread identity it ran under, and answers `outcome(account)`.
final class CountingAdmissionCheck: AdmissionCheck {
    let runs = Recorder<String>()
    let outcome: @Sendable (Identity) -> AdmissionOutcome

    init(_ outcome: @escaping @Sendable (Identity) -> AdmissionOutcome = { _ in .admit }) {
        self.outcome = outcome
    }

    func evaluate(account: Identity, reason: AdmissionReason) async -> AdmissionOutcome {
        runs.append("\(account.name) \(reason) \(IdentityContext.currentThreadIdentity?.name ?? "nil")")
        await Task.yield()
        return outcome(account)
    }
}

func admissionManager(_ check: CountingAdmissionCheck, cache: TimeInterval = 60, retry: TimeInterval = 30) -> PolicyManager {
    var settings = RuntimeSettings()
    settings.admissionCacheDuration = cache
    settings.admissionRetryInterval = retry
    let manager = PolicyManager(settings: settings, policySource: StaticPolicySource(
        [alice: ownedPolicy("alice"), bob: ownedPolicy("bob"), carol: ownedPolicy("carol")]))
    manager.registerAdmissionCheck(check)
    return manager
}

@Suite("Admission at the service boundary (article ServiceBoundary)")
struct AdmissionTests {
    @Test("a managed account runs its checks under its own identity, then the operation runs under it; a pass is cached")
    func admitsAndCaches() async throws {
        let check = CountingAdmissionCheck()
        let manager = admissionManager(check)
        let seen = try await manager.withAdmittedIdentity(alice, reason: "GET /documents") {
            let inTask = await Task { IdentityContext.currentThreadIdentity }.value
            return (IdentityContext.currentThreadIdentity, inTask)
        }
        #expect(seen.0 == alice && seen.1 == alice)
        #expect(IdentityContext.currentThreadIdentity == nil)
        try await manager.withAdmittedIdentity(alice) {}
        #expect(check.runs.all == ["alice@contoso.com GET /documents alice@contoso.com"])
    }

    @Test("no cache: every admission runs the checks")
    func noCache() async throws {
        let check = CountingAdmissionCheck()
        let manager = admissionManager(check, cache: 0)
        for _ in 0..<3 { try await manager.withAdmittedIdentity(alice) {} }
        #expect(check.runs.count == 3)
    }

    @Test("unmanaged accounts and \"\" are admitted without checks")
    func unmanagedWithoutChecks() async throws {
        let check = CountingAdmissionCheck { _ in .deny("never") }
        let manager = admissionManager(check)
        #expect(try await manager.withAdmittedIdentity(dave) { IdentityContext.currentThreadIdentity } == dave)
        #expect(try await manager.withAdmittedIdentity(.unmanaged) { IdentityContext.currentThreadIdentity } == .unmanaged)
        #expect(check.runs.count == 0)
    }

    @Test("refused at once, notAllowed: blocked, outside allowedAccounts, claimed; the operation never runs")
    func refusals() async {
        let check = CountingAdmissionCheck()
        let manager = admissionManager(check)
        manager.blockAccount(bob, reason: .clockedOut)
        manager.allowedAccounts = [alice, bob, dave]
        let ran = Recorder<Bool>()
        for (account, cause) in [(bob, AdmissionError.Cause.blocked(.clockedOut)), (carol, .notInAllowedAccounts)] {
            await #expect(throws: AdmissionError(account: account, result: .notAllowed, cause: cause)) {
                try await manager.withAdmittedIdentity(account) { ran.append(true) }
            }
        }
        var limited = RuntimeSettings()
        limited.maxManagedAccounts = 1
        let claiming = PolicyManager(settings: limited, policySource: StaticPolicySource([carol: ownedPolicy("carol")]))
        await #expect(throws: AdmissionError(account: carol, result: .notAllowed, cause: .claimed)) {
            try await claiming.withAdmittedIdentity(carol) { ran.append(true) }
        }
        #expect(ran.count == 0 && check.runs.count == 0)
        #expect(AdmissionError(account: bob, result: .notAllowed, cause: .claimed).code == 2)
    }

    @Test("a denial fails the admission and blocks the account; after the retry interval a pass unblocks it")
    func denialBlocksThenRetries() async throws {
        let verdict = LockedValue(AdmissionOutcome.deny("tenant suspended"))
        let check = CountingAdmissionCheck { _ in verdict.withLock { $0 } }
        let manager = admissionManager(check, retry: 3_600)
        await #expect(throws: AdmissionError(account: alice, result: .failed, cause: .denied("tenant suspended"))) {
            try await manager.withAdmittedIdentity(alice) {}
        }
        #expect(manager.blockReason(for: alice) == .admissionCheckFailed)
        #expect(await switchUI(manager, alice, window: "w") == .notAllowed)
        await #expect(throws: AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.admissionCheckFailed))) {
            try await manager.withAdmittedIdentity(alice) {}
        }
        #expect(check.runs.count == 1)   // within the retry interval the checks are not asked again
        verdict.withLock { $0 = .admit }
        var settings = manager.settings
        settings.admissionRetryInterval = 0   // the interval has passed
        manager.settings = settings
        try await manager.withAdmittedIdentity(alice) {}
        #expect(manager.blockReason(for: alice) == .notBlocked)
        #expect(check.runs.count == 2)
    }

    @Test("a check that cannot decide fails this admission only: nothing blocked, nothing cached")
    func unavailable() async throws {
        let verdict = LockedValue(AdmissionOutcome.unavailable("token service unreachable"))
        let check = CountingAdmissionCheck { _ in verdict.withLock { $0 } }
        let manager = admissionManager(check)
        await #expect(throws: AdmissionError(account: alice, result: .failed, cause: .unavailable("token service unreachable"))) {
            try await manager.withAdmittedIdentity(alice) {}
        }
        #expect(manager.blockReason(for: alice) == .notBlocked)
        verdict.withLock { $0 = .admit }
        try await manager.withAdmittedIdentity(alice) {}
        #expect(check.runs.count == 2)
    }

    @Test("errors of the operation pass through unchanged")
    func operationErrors() async {
        let manager = admissionManager(CountingAdmissionCheck())
        struct Boom: Error, Equatable {}
        await #expect(throws: Boom()) { try await manager.withAdmittedIdentity(alice) { throw Boom() } }
    }

    @Test("the completion-handler form runs the operation on the queue under the account, then completes once")
    func completionHandlerForm() async {
        let manager = admissionManager(CountingAdmissionCheck())
        manager.blockAccount(bob, reason: .blockedByAdministrator)
        let seen = Recorder<String>()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            manager.withAdmittedIdentity(alice, operation: {
                seen.append("operation \(IdentityContext.currentThreadIdentity?.name ?? "nil")")
            }, completionHandler: { error in
                seen.append("completion \(error.map { "\($0.code)" } ?? "nil") \(IdentityContext.currentThreadIdentity?.name ?? "nil")")
                done.resume()
            })
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            manager.withAdmittedIdentity(bob, operation: { seen.append("never") }, completionHandler: { error in
                seen.append("completion \(error.map { "\($0.code)" } ?? "nil")")
                done.resume()
            })
        }
        #expect(seen.all == ["operation alice@contoso.com", "completion nil nil", "completion 2"])
    }

    @Test("10,000 concurrent admissions over 1,000 accounts: each decides exactly once; checks run once per account")
    func concurrentAdmissions() async {
        let accounts = (0..<1_000).map { Identity("user\($0)@tenant\($0 % 50).example") }
        let denied = Set(accounts.enumerated().filter { $0.offset.isMultiple(of: 10) }.map(\.element))
        let check = CountingAdmissionCheck { denied.contains($0) ? .deny("suspended") : .admit }
        var settings = RuntimeSettings()
        settings.admissionRetryInterval = 3_600
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource(
            tenants: Dictionary(uniqueKeysWithValues: (0..<50).map { (TenantID("tenant\($0).example"), ownedPolicy("t\($0)")) })))
        manager.registerAdmissionCheck(check)
        let decisions = LockedValue([Int](repeating: 0, count: 10_000))
        let wrong = LockedValue(0)
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<10_000 {
                group.addTask {
                    let account = accounts[(index &* 7_919) % accounts.count]
                    do {
                        let inside = try await manager.withAdmittedIdentity(account) { IdentityContext.currentThreadIdentity }
                        if inside != account || denied.contains(account) { wrong.withLock { $0 += 1 } }
                    } catch let error as AdmissionError {
                        if !denied.contains(account) || error.account != account { wrong.withLock { $0 += 1 } }
                    } catch {
                        wrong.withLock { $0 += 1 }
                    }
                    decisions.withLock { $0[index] += 1 }
                }
            }
        }
        #expect(decisions.withLock { $0 }.allSatisfy { $0 == 1 })
        #expect(wrong.withLock { $0 } == 0)
        #expect(check.runs.count == 1_000)
        #expect(Set(manager.blockedAccounts) == denied)
    }
}

@Suite("admitWithoutWaiting: an admission decided at once, or false when the checks must run")
struct AdmitWithoutWaitingTests {
    @Test("checks to run: false, and nothing started or told; after the pass, true at once; the checks ran once")
    func falseUntilAPassThenTrue() async throws {
        let check = CountingAdmissionCheck()
        let manager = admissionManager(check)
        let observer = RecordingObserver()
        manager.observer = observer
        #expect(try manager.admitWithoutWaiting(alice, reason: "GET /a") == false)
        #expect(check.runs.count == 0 && observer.seen.all.isEmpty)
        try await manager.withAdmittedIdentity(alice, reason: "GET /a") {}
        #expect(try manager.admitWithoutWaiting(alice, reason: "GET /b") == true)
        #expect(check.runs.count == 1)
        #expect(observer.seen.all == [.admitted(alice, "GET /a"), .admitted(alice, "GET /b")])
        #expect(IdentityContext.currentThreadIdentity == nil)
    }

    @Test("a check that denies is never skipped: false before its run, then refused (blocked) at once")
    func deniedIsNeverAdmitted() async throws {
        let check = CountingAdmissionCheck { _ in .deny("no device") }
        let manager = admissionManager(check)
        #expect(try manager.admitWithoutWaiting(bob) == false)
        await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(bob) {} }
        #expect(throws: AdmissionError(account: bob, result: .notAllowed, cause: .blocked(.admissionCheckFailed))) {
            try manager.admitWithoutWaiting(bob)
        }
    }

    @Test("refused at once as withAdmittedIdentity refuses: blocked, outside allowedAccounts, before the first load")
    func refusals() throws {
        let manager = admissionManager(CountingAdmissionCheck())
        manager.blockAccount(bob, reason: .clockedOut)
        manager.allowedAccounts = [alice, bob]
        #expect(throws: AdmissionError(account: bob, result: .notAllowed, cause: .blocked(.clockedOut))) {
            try manager.admitWithoutWaiting(bob)
        }
        #expect(throws: AdmissionError(account: carol, result: .notAllowed, cause: .notInAllowedAccounts)) {
            try manager.admitWithoutWaiting(carol)
        }
        let unloaded = PolicyManager(policySource: LatePolicySourceForAdmission())
        #expect(throws: AdmissionError.self) { try unloaded.admitWithoutWaiting(alice) }
        #expect(try unloaded.admitWithoutWaiting(.unmanaged) == true)
    }
}

/// A source that never loads.
final class LatePolicySourceForAdmission: PolicySource {
    var hasLoaded: Bool { false }
    var policies: PolicySet { PolicySet() }
    func setChangeHandler(_ handler: (@Sendable () -> Void)?) {}
}

@Suite("AdmissionReason: free text or a request's method and path, equal when their descriptions are")
struct AdmissionReasonTests {
    @Test("a request's reason reads METHOD /path, and equals the same text given as a string")
    func requestReasonReadsAsText() {
        let request = AdmissionReason(method: "GET") { "/documents/a b" }
        #expect(request.description == "GET /documents/a b")
        #expect(request == AdmissionReason("GET /documents/a b"))
        #expect(AdmissionReason("GET /documents/a b") == request)
        #expect(request.hashValue == AdmissionReason("GET /documents/a b").hashValue)
        #expect(Set([request, "GET /documents/a b", AdmissionReason(method: "GET") { "/documents/a b" }]).count == 1)
    }

    @Test("reasons that read differently are different, whichever way they were made")
    func differentDescriptionsDiffer() {
        #expect(AdmissionReason(method: "GET") { "/a" } != AdmissionReason(method: "PUT") { "/a" })
        #expect(AdmissionReason(method: "GET") { "/a" } != AdmissionReason(method: "GET") { "/b" })
        #expect(AdmissionReason(method: "GET") { "/a" } != AdmissionReason("GET /a "))
        // Split differently, read the same: equal.
        #expect(AdmissionReason(method: "GET /") { "a" } == AdmissionReason(method: "GET") { "/ a" })
        #expect(AdmissionReason(method: "GET") { "/a" } != .request)
    }

    @Test("a check sees the request's reason as text")
    func checkSeesTheText() async throws {
        let check = CountingAdmissionCheck()
        let manager = admissionManager(check)
        try await manager.withAdmittedIdentity(alice, reason: AdmissionReason(method: "POST") { "/notes" }) {}
        #expect(check.runs.all == ["\(alice.name) POST /notes \(alice.name)"])
    }
}
