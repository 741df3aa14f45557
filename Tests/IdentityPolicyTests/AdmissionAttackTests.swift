import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// Adversarial tests of admission runs (sharing, cancellation, runs given up for taking too long, replaced
/// checks, the end of `run()`) and of identity switches decided again when their checks or the delegate answer.
@Suite("Admission and switch attacks")
struct AdmissionAttackTests {
    /// How one admission ended.
    enum Ended: Sendable, Equatable {
        case admitted
        case refused(AdmissionError)

        var cause: AdmissionError.Cause? {
            if case let .refused(error) = self { return error.cause }
            return nil
        }

        var isDenied: Bool {
            if case .denied? = cause { return true }
            return false
        }

        var isUnavailable: Bool {
            if case .unavailable? = cause { return true }
            return false
        }
    }

    private static let cancelled = AdmissionError.Cause.unavailable("the admission was cancelled before its checks answered")

    private func manager(
        accounts: [Identity] = [alice], timeout: TimeInterval = 3_600, cache: TimeInterval = 3_600,
        _ checks: [any AdmissionCheck]
    ) -> PolicyManager {
        var settings = RuntimeSettings()
        settings.admissionCacheDuration = cache
        settings.admissionCheckTimeout = timeout
        settings.admissionRetryInterval = 3_600
        var policies: [Identity: Policy] = [:]
        for account in accounts { policies[account] = ownedPolicy(account.name) }
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource(policies))
        manager.admissionChecks = checks
        return manager
    }

    /// Starts an admission that records how it ended, and whether its operation ran (with which identity).
    private func admission(
        _ manager: PolicyManager, _ account: Identity = alice, reason: AdmissionReason = .request,
        ran: Recorder<String>? = nil
    ) -> (Task<Void, Never>, Recorder<Ended>) {
        let ended = Recorder<Ended>()
        let task = Task {
            do {
                try await manager.withAdmittedIdentity(account, reason: reason) {
                    ran?.append("\(reason) \(IdentityContext.currentThreadIdentity?.name ?? "nil")")
                }
                ended.append(.admitted)
            } catch let error as AdmissionError {
                ended.append(.refused(error))
            } catch {
                Issue.record("an admission threw \(error)")
            }
        }
        return (task, ended)
    }

    // MARK: Replaced checks and timeouts

    @Test("a denial of checks replaced while they ran blocks nothing; the new checks' pass stays trusted")
    func denialOfReplacedChecksBlocksNothing() async throws {
        let gate = Gate()
        let old = ClosureAdmissionCheck { _, _ in
            await gate.wait()
            return .deny("old rules")
        }
        let manager = manager([old])
        let (_, underWay) = admission(manager)
        #expect(await eventually { gate.entered == 1 })
        manager.admissionChecks = [CountingAdmissionCheck { _ in .admit }]
        let (_, afterChange) = admission(manager)
        #expect(await eventually { afterChange.count == 1 })
        #expect(afterChange.all == [.admitted])
        gate.open()
        #expect(await eventually { underWay.count == 1 })
        #expect(manager.blockReason(for: alice) == .notBlocked)
        #expect(try manager.admitWithoutWaiting(alice))
    }

    @Test("an answer of a run given up for taking too long counts for nobody: a late denial blocks nothing, a late pass is not trusted",
          arguments: [AdmissionOutcome.admit, .deny("late")])
    func lateAnswerAfterTimeoutCountsForNobody(_ late: AdmissionOutcome) async throws {
        let gate = Gate()
        let answered = Recorder<Bool>()
        let runs = LockedValue(0)
        let check = ClosureAdmissionCheck { _, _ in
            let first = runs.withLock { $0 += 1; return $0 == 1 }
            guard first else { return .unavailable("the second run answers at once") }
            await gate.wait()   // ignores cancellation
            answered.append(true)
            return late
        }
        let manager = manager([check])
        let (_, first) = admission(manager)
        #expect(await eventually { manager.state.withLock { $0.admission.waitingAdmissions(of: alice) } == 1 })
        let (_, second) = admission(manager)
        #expect(await eventually { manager.state.withLock { $0.admission.waitingAdmissions(of: alice) } == 2 })
        var settings = manager.settings
        settings.admissionCheckTimeout = 0.000_001
        manager.settings = settings
        let (_, third) = admission(manager)
        #expect(await eventually { first.count == 1 && second.count == 1 && third.count == 1 })
        #expect(first.all.allSatisfy { $0.isUnavailable } && second.all.allSatisfy { $0.isUnavailable })
        #expect(third.all.allSatisfy { $0.isUnavailable })
        gate.open()
        #expect(await eventually { answered.count == 1 })
        try await Task.sleep(for: .milliseconds(50))
        #expect(manager.blockReason(for: alice) == .notBlocked)
        #expect(try manager.admitWithoutWaiting(alice) == false)
    }

    @Test("checks replaced while a run hangs: its waiter leaves when cancelled, the new run answers its own, the old denial blocks nothing")
    func replacedRunHangingLeavesTheNewRunAlone() async throws {
        let oldGate = Gate()
        let newGate = Gate()
        let manager = manager([ClosureAdmissionCheck { _, _ in
            await oldGate.wait()
            return .deny("old")
        }])
        defer { oldGate.open(); newGate.open() }
        let (oldTask, old) = admission(manager)
        #expect(await eventually { oldGate.entered == 1 })
        let newRuns = Recorder<Identity>()
        manager.admissionChecks = [GatedAdmissionCheck(gate: newGate, runs: newRuns)]
        let (_, new) = admission(manager)
        #expect(await eventually { newRuns.count == 1 })
        oldTask.cancel()
        #expect(await eventually { old.count == 1 })
        #expect(old.all == [.refused(AdmissionError(account: alice, result: .failed, cause: Self.cancelled))])
        #expect(new.count == 0)
        newGate.open()
        #expect(await eventually { new.count == 1 })
        #expect(new.all == [.admitted])
        oldGate.open()
        try await Task.sleep(for: .milliseconds(50))
        #expect(manager.blockReason(for: alice) == .notBlocked)
    }

    @Test("extreme timeouts set in code: every admission ends, a refusal blocks only on a denial",
          arguments: [1e-9, 0, -1, 1e12, Double.infinity, Double.nan])
    func extremeTimeouts(_ timeout: Double) async throws {
        for outcome in [AdmissionOutcome.admit, .deny("no")] {
            let manager = manager(timeout: timeout, [CountingAdmissionCheck { _ in outcome }])
            let (_, ended) = admission(manager)
            #expect(await eventually { ended.count == 1 })
            guard let result = ended.all.first else { continue }
            #expect((manager.blockReason(for: alice) == .admissionCheckFailed) == result.isDenied)
            if timeout >= 1 {
                // A huge timeout bounds nothing a quick check does.
                #expect(result == (outcome == .admit ? .admitted : result))
                #expect(!result.isUnavailable)
            }
        }
    }

    @Test("a NaN timeout decides the same way every time (no race between the checks and a zero deadline)")
    func nanTimeoutIsDeterministic() async throws {
        var seen: [String: Int] = [:]
        for _ in 0..<40 {
            let manager = manager(timeout: .nan, [CountingAdmissionCheck { _ in .admit }])
            let (_, ended) = admission(manager)
            #expect(await eventually { ended.count == 1 })
            let key = ended.all.first.map { $0 == .admitted ? "admitted" : "refused" } ?? "none"
            seen[key, default: 0] += 1
        }
        #expect(seen.count == 1, "NaN timeout outcomes: \(seen)")
    }

    // MARK: Identity of the run

    @Test("the checks run with the account as thread identity, whatever identity the admissions come from")
    func checksRunUnderTheAccount() async throws {
        let gate = Gate()
        let seen = Recorder<String>()
        let check = ClosureAdmissionCheck { account, _ in
            seen.append(IdentityContext.currentThreadIdentity?.name ?? "nil")
            await gate.wait()
            seen.append(IdentityContext.currentThreadIdentity?.name ?? "nil")
            return .admit
        }
        let manager = manager(cache: 0, [check])
        let ran = Recorder<String>()
        let after = Recorder<String>()
        let leader = Task {
            try await IdentityContext.withThreadIdentity(bob) {
                try await manager.withAdmittedIdentity(alice, reason: "leader") {
                    ran.append("leader \(IdentityContext.currentThreadIdentity?.name ?? "nil")")
                }
                after.append(IdentityContext.currentThreadIdentity?.name ?? "nil")
            }
        }
        #expect(await eventually { gate.entered == 1 })
        let joiner = Task {
            try await IdentityContext.withThreadIdentity(carol) {
                try await manager.withAdmittedIdentity(alice, reason: "joiner") {
                    ran.append("joiner \(IdentityContext.currentThreadIdentity?.name ?? "nil")")
                }
            }
        }
        let handler = Recorder<AdmissionError?>()
        IdentityContext.withThreadIdentity(dave) {
            manager.withAdmittedIdentity(alice, reason: "handler", operation: {
                ran.append("handler \(IdentityContext.currentThreadIdentity?.name ?? "nil")")
            }, completionHandler: { handler.append($0) })
        }
        #expect(await eventually { manager.state.withLock { $0.admission.waitingAdmissions(of: alice) } == 3 })
        gate.open()
        try await leader.value
        try await joiner.value
        #expect(await eventually { handler.count == 1 })
        #expect(seen.all == ["alice@contoso.com", "alice@contoso.com"])
        #expect(Set(ran.all) == ["leader alice@contoso.com", "joiner alice@contoso.com", "handler alice@contoso.com"])
        #expect(after.all == ["bob@contoso.com"])
    }

    // MARK: run() and shutdown

    @Test("run() ending waits for a run of the checks in flight; the completion-handler admission is decided by it")
    func runEndsAfterTheRunInFlight() async throws {
        let gate = Gate()
        let manager = manager([ClosureAdmissionCheck { _, _ in
            await gate.wait()
            return .admit
        }])
        defer { gate.open() }
        let work = Task { await manager.run() }
        let handler = Recorder<AdmissionError?>()
        let ran = Recorder<Bool>()
        manager.withAdmittedIdentity(alice, operation: { ran.append(true) }, completionHandler: { handler.append($0) })
        #expect(await eventually { gate.entered == 1 })
        work.cancel()
        let ended = Recorder<Bool>()
        Task { await work.value; ended.append(true) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(ended.count == 0 && handler.count == 0)
        gate.open()
        #expect(await eventually { ended.count == 1 && handler.count == 1 })
        #expect(handler.all == [nil])
        #expect(ran.all == [true])
    }

    @Test("no run of admission checks outlives run(): the checks of a run whose admissions all left are ended with it")
    func noCheckRunOutlivesRun() async throws {
        let cancelled = Recorder<Bool>()
        let answered = Recorder<Bool>()
        let manager = manager([ClosureAdmissionCheck { _, _ in
            do {
                try await Task.sleep(for: .seconds(3_600))
            } catch {
                cancelled.append(true)
            }
            answered.append(true)
            return .deny("decided after the service stopped")
        }])
        let work = Task { await manager.run() }
        let (task, ended) = admission(manager)
        #expect(await eventually { manager.state.withLock { $0.admission.waitingAdmissions(of: alice) } == 1 })
        task.cancel()
        #expect(await eventually { ended.count == 1 })
        work.cancel()
        let runEnded = Recorder<Bool>()
        Task { await work.value; runEnded.append(true) }
        #expect(await eventually { runEnded.count == 1 })
        // The manager started this run of the checks on its own: once run() has returned it must be over.
        #expect(await eventually(within: 3) { answered.count == 1 })
        #expect(manager.blockReason(for: alice) == .notBlocked)
    }

    // MARK: Exactly once

    @Test("cancellations racing the checks' answer: each admission ends once, the observer hears it once")
    func cancellationRacingFinish() async throws {
        let observer = RecordingObserver()
        let manager = manager(cache: 0, [ClosureAdmissionCheck { _, _ in
            for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
            return .admit
        }])
        manager.observer = observer
        let ran = Recorder<String>()
        var all: [(String, Task<Void, Never>, Recorder<Ended>)] = []
        for index in 0..<300 {
            let reason = "r\(index)"
            let (task, ended) = admission(manager, reason: AdmissionReason(reason), ran: ran)
            all.append((reason, task, ended))
            if Bool.random() {
                for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
                task.cancel()
            }
        }
        let handlers = Recorder<String>()
        for index in 0..<50 {
            manager.withAdmittedIdentity(alice, reason: AdmissionReason("h\(index)"), operation: {},
                                         completionHandler: { _ in handlers.append("h\(index)") })
        }
        let started = all
        #expect(await eventually { started.allSatisfy { $0.2.count >= 1 } && handlers.count >= 50 })
        try await Task.sleep(for: .milliseconds(100))
        #expect(all.allSatisfy { $0.2.count == 1 })
        #expect(Set(handlers.all).count == 50 && handlers.count == 50)
        let heard = observer.seen.all
        #expect(heard.count == 350)
        for (reason, _, ended) in all {
            let mine = heard.filter {
                switch $0 {
                case let .admitted(_, seenReason), let .refused(_, seenReason): seenReason == reason
                default: false
                }
            }
            #expect(mine.count == 1, "\(reason) heard \(mine.count) times")
            switch ended.all.first {
            case .admitted?:
                #expect(mine == [.admitted(alice, reason)])
                #expect(ran.all.contains("\(reason) alice@contoso.com"))
            case let .refused(error)?:
                #expect(error.cause == Self.cancelled)
                #expect(mine == [.refused(error, reason)])
                #expect(!ran.all.contains { $0.hasPrefix("\(reason) ") })
            case nil:
                Issue.record("\(reason) never ended")
            }
        }
    }

    @Test("a timeout racing the checks' answer: every waiter ends once; blocked exactly when a waiter was denied")
    func timeoutRacingAnswer() async throws {
        for round in 0..<60 {
            let deny = round % 2 == 0
            let returned = Recorder<Bool>()
            let manager = manager(timeout: 0.002, [ClosureAdmissionCheck { _, _ in
                try? await Task.sleep(for: .microseconds(Int.random(in: 0...4_000)))
                returned.append(true)
                return deny ? .deny("no") : .admit
            }])
            let admissions = (0..<3).map { _ in admission(manager) }
            #expect(await eventually { admissions.allSatisfy { $0.1.count >= 1 } })
            #expect(await eventually { returned.count >= 1 })
            try await Task.sleep(for: .milliseconds(5))
            let results = admissions.flatMap { $0.1.all }
            #expect(results.count == 3)
            let blocked = manager.blockReason(for: alice) == .admissionCheckFailed
            #expect(blocked == results.contains { $0.isDenied }, "round \(round): \(results)")
            if !deny, !results.contains(.admitted) {
                // Every run timed out: a late pass is trusted by nobody.
                #expect(try manager.admitWithoutWaiting(alice) == false, "round \(round)")
            }
        }
    }

    @Test("many accounts, random cancellations and blocks: every admission ends, none runs for a blocked account")
    func stressManyAccounts() async throws {
        let accounts: [Identity] = (0..<8).map { Identity("user\($0)@stress.example") }
        let denied = accounts[3]
        let blockedFromStart = [accounts[0], accounts[1]]
        let blockedLater = accounts[4]
        let blockedAt = LockedValue<Int?>(nil)
        let manager = manager(accounts: accounts, timeout: 0.3, cache: 0, [ClosureAdmissionCheck { account, _ in
            try? await Task.sleep(for: .microseconds(Int.random(in: 0...3_000)))
            if Int.random(in: 0..<40) == 0 { try? await Task.sleep(for: .milliseconds(500)) }   // a timeout now and then
            return account == denied ? .deny("denied") : .admit
        }])
        for account in blockedFromStart { manager.blockAccount(account, reason: .blockedByAdministrator) }
        let ran = Recorder<(Identity, Int)>()
        var tasks: [(Identity, Int, Task<Void, Never>, Recorder<Ended>)] = []
        let handlers = LockedValue<[Int: Int]>([:])
        for index in 0..<400 {
            let account = accounts.randomElement()!
            if index == 200 {
                manager.blockAccount(blockedLater, reason: .clockedOut)
                blockedAt.withLock { $0 = index }
            }
            let ended = Recorder<Ended>()
            let task = Task {
                do {
                    try await manager.withAdmittedIdentity(account) { ran.append((account, index)) }
                    ended.append(.admitted)
                } catch let error as AdmissionError {
                    ended.append(.refused(error))
                } catch {
                    Issue.record("\(error)")
                }
            }
            tasks.append((account, index, task, ended))
            if index % 4 == 0 {
                handlers.withLock { $0[index] = 0 }
                manager.withAdmittedIdentity(account, operation: { ran.append((account, index)) },
                                             completionHandler: { _ in handlers.withLock { $0[index, default: 0] += 1 } })
            }
            if Int.random(in: 0..<4) == 0 { task.cancel() }
            if index % 25 == 0 { await Task.yield() }
        }
        let started = tasks
        #expect(await eventually(within: 60) {
            started.allSatisfy { $0.3.count >= 1 } && handlers.withLock { $0.values.allSatisfy { $0 >= 1 } }
        })
        try await Task.sleep(for: .milliseconds(100))
        #expect(tasks.allSatisfy { $0.3.count == 1 })
        #expect(handlers.withLock { $0.values.allSatisfy { $0 == 1 } })
        let operations = ran.all
        #expect(!operations.contains { blockedFromStart.contains($0.0) || $0.0 == denied })
        #expect(!operations.contains { $0.0 == blockedLater && $0.1 >= 200 })
        // Not a hollow pass: some admissions got through.
        var causes: [String: Int] = [:]
        for (_, _, _, ended) in tasks { for result in ended.all { causes["\(result.cause.map { "\($0)".prefix(40) } ?? "admitted")", default: 0] += 1 } }
        #expect(operations.count > 0, "\(causes)")
    }

    @Test("an account blocked while its checks run: every admission waiting for them is refused, the handler once")
    func blockedWhileChecksRun() async throws {
        let gate = Gate()
        let runs = Recorder<Identity>()
        let manager = manager([GatedAdmissionCheck(gate: gate, runs: runs)])
        let observer = RecordingObserver()
        manager.observer = observer
        let ran = Recorder<String>()
        let waiters = (0..<5).map { admission(manager, reason: AdmissionReason("w\($0)"), ran: ran) }
        let handler = Recorder<AdmissionError?>()
        manager.withAdmittedIdentity(alice, reason: "handler", operation: { ran.append("handler") },
                                     completionHandler: { handler.append($0) })
        #expect(await eventually { manager.state.withLock { $0.admission.waitingAdmissions(of: alice) } == 6 })
        manager.blockAccount(alice, reason: .blockedByAdministrator)
        gate.open()
        #expect(await eventually { waiters.allSatisfy { $0.1.count == 1 } && handler.count == 1 })
        let refusal = AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.blockedByAdministrator))
        #expect(waiters.allSatisfy { $0.1.all == [.refused(refusal)] })
        #expect(handler.all == [refusal])
        #expect(ran.count == 0)
        #expect(observer.seen.count == 6)
        // The pass counts once the block is lifted (a pass is forgotten when a block changes: checks run again).
        manager.unblockAccount(alice)
        try await manager.withAdmittedIdentity(alice) {}
        #expect(runs.count <= 2)
    }

    // MARK: Switches

    @Test("a switch superseded while its checks run, then the account blocked: it completes canceled once and blocks nothing")
    func supersededSwitchThenBlocked() async throws {
        let gate = Gate()
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await gate.wait()
            return .fails
        }])
        let first = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: "w") { first.append($0) }
        #expect(await eventually { gate.entered == 1 })
        #expect(await switchUI(manager, dave, window: "w") == .success)
        #expect(await eventually { first.count == 1 })
        manager.blockAccount(alice, reason: .clockedOut)
        gate.open()
        try await Task.sleep(for: .milliseconds(100))
        #expect(first.all == [.canceled])
        #expect(manager.uiPolicyIdentity(for: "w") == dave)
        manager.unblockAccount(alice, reason: .clockedOut)
        #expect(manager.blockReason(for: alice) == .notBlocked)
    }

    @Test("the delegate answering success twice: one result, the window set once, the second answer reported")
    func delegateAnswersSuccessTwice() async throws {
        let account: Identity = "twice-success@fabrikam.com"
        let manager = makeManager()
        manager.delegate = ClosureDelegate(onSwitch: { _, _, _, answer in
            answer(.success)
            answer(.success)
        })
        let events = Recorder<PolicyEvent>()
        let stream = manager.events
        let listener = Task { for await event in stream { events.append(event) } }
        defer { listener.cancel() }
        let issues = await collectIssues(marker: "twice-success") { issues in
            let result = await manager.requestIdentitySwitch(to: account, reason: .openURL, window: "w")
            #expect(result == .success)
            #expect(await eventually { issues.count == 1 })
        }
        #expect(issues.count == 1)
        #expect(manager.uiPolicyIdentity(for: "w") == account)
        try await Task.sleep(for: .milliseconds(50))
        #expect(events.all.filter { if case .uiIdentityDidChange = $0 { true } else { false } }.count == 1)
    }

    @Test("the delegate answering success twice after the account was blocked: notAllowed, nothing set")
    func delegateAnswersSuccessTwiceAfterBlock() async throws {
        let manager = makeManager()
        let answers = LockedValue<(@Sendable (SwitchIdentityResult) -> Void)?>(nil)
        manager.delegate = ClosureDelegate(onSwitch: { _, _, _, answer in answers.withLock { $0 = answer } })
        let result = Task { await manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") }
        #expect(await eventually { answers.withLock { $0 != nil } })
        manager.blockAccount(alice, reason: .clockedOut)
        let answer = try #require(answers.withLock { $0 })
        _ = await collectIssues(marker: "identitySwitchRequired(\"alice@contoso.com\", reason: \(IdentitySwitchReason.openURL), window: w") { _ in
            answer(.success)
            answer(.success)
            #expect(await result.value == .notAllowed)
        }
        #expect(manager.uiPolicyIdentity(for: "w") == nil)
    }
}
