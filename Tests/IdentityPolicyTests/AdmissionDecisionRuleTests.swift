import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import IdentityTesting
import Testing

/// An admission decision reduced to what a caller sees.
private func summary(_ decision: PolicyState.AdmissionDecision?) -> String {
    switch decision {
    case nil: "checks"
    case .admitted?: "admitted"
    case let .refused(error)?: "refused \(error.result) \(error.cause)"
    case .checks(.admitted)?: "admitted"
    case .checks?: "checks"
    }
}

/// The admission rule of the article ServiceBoundary, steps 0 to 2, written out the long way: every fact
/// read on its own from the state (the block reason, the standing for the retry, the standing for the
/// decision, the pass only after the checks).
private func ruleWrittenOut(_ state: PolicyState, _ account: Identity, at now: UInt64) -> String {
    if account.isUnmanaged { return "admitted" }
    guard state.policiesLoaded else {
        return summary(.refused(AdmissionError(
            account: account, result: .failed, cause: .unavailable("the policy source has not loaded its policies yet"))))
    }
    if let block = state.blockReason(for: account) {
        var retries = state.blocks.causes(of: account, tenant: state.accounts.tenant(of: account)) == [.admissionCheckFailed]
        if case let .managed(policy) = state.accounts.standing(of: account), policy.isAccountBlocked { retries = false }
        retries = retries && state.admission.retriesDenial(
            of: account, at: now, retryInterval: state.settings.admissionRetryInterval)
        if !retries {
            return summary(.refused(AdmissionError(account: account, result: .notAllowed, cause: .blocked(block))))
        }
    }
    if let allowed = state.settings.allowedAccounts, !allowed.contains(account) {
        return summary(.refused(AdmissionError(account: account, result: .notAllowed, cause: .notInAllowedAccounts)))
    }
    switch state.accounts.standing(of: account) {
    case nil: return "admitted"
    case .claimed: return summary(.refused(AdmissionError(account: account, result: .notAllowed, cause: .claimed)))
    case .undecided:
        return summary(.refused(AdmissionError(
            account: account, result: .failed,
            cause: .unavailable(state.undecidedReason(for: account) ?? "its policy cannot be read"))))
    case .managed:
        // The pass is the state machine's own; without checks nobody runs any.
        return state.admission.checks.isEmpty ? "admitted" : "pass or checks"
    }
}

private let erinOfContoso: Identity = "erin@contoso.com"
private let frankOfFabrikam: Identity = "frankOfFabrikam@fabrikam.com"
private let graceOfNorthwind: Identity = "graceOfNorthwind@northwind.com"

/// Admission decides every refusal and admission exactly as the rule reads, with one look at the account.
@Suite("Admission decides as the rule reads: blocks, allow list, claims, undecided, checks and passes")
struct AdmissionDecisionRuleTests {
    @Test("over many states, each decision matches the rule with every fact read on its own")
    func decisionsMatchTheRuleWrittenOut() async throws {
        let source = LatePolicySource()
        var settings = RuntimeSettings()
        settings.admissionRetryInterval = 30
        settings.maxManagedAccounts = 3
        let manager = PolicyManager(settings: settings, policySource: source)
        let verdict = LockedValue(AdmissionOutcome.deny("no"))
        let check = CountingAdmissionCheck { _ in verdict.withLock { $0 } }
        let accounts: [Identity] = [alice, bob, carol, dave, erinOfContoso, frankOfFabrikam, graceOfNorthwind, .unmanaged]
        let policySets: [PolicySet] = [
            PolicySet(accounts: [alice: ownedPolicy("alice"), carol: ownedPolicy("carol")]),
            PolicySet(
                accounts: [alice: ownedPolicy("alice"), bob: Policy(identity: nil, isAccountBlocked: true)],
                tenants: ["fabrikam.com": ownedPolicy("fabrikam")], unavailableTenants: ["northwind.com"]),
            PolicySet(
                accounts: [alice: ownedPolicy("alice")], tenants: ["contoso.com": ownedPolicy("contoso")],
                unavailableAccounts: [carol]),
            PolicySet(accounts: [alice: ownedPolicy("alice")], isComplete: false),
        ]
        var generator = SplitMix64(seed: 0x5eed_ad31)
        var compared = 0
        func compareAll(_ stage: String) {
            let nows = [DispatchTime.now().uptimeNanoseconds, UInt64.max / 2]
            manager.state.withLock { state in
                for account in accounts {
                    for now in nows {
                        let expected = ruleWrittenOut(state, account, at: now)
                        let withoutChecks = summary(state.admissionStepWithoutChecks(for: account, at: now))
                        var copy = state
                        let step = summary(copy.admissionStep(for: account, at: now))
                        if expected == "pass or checks" {
                            #expect(withoutChecks == "checks" || withoutChecks == "admitted", "\(stage) \(account)")
                            #expect(step == withoutChecks, "\(stage) \(account)")
                        } else {
                            #expect(withoutChecks == expected, "\(stage) \(account)")
                            #expect(step == expected, "\(stage) \(account)")
                        }
                        compared += 1
                    }
                }
            }
        }
        compareAll("before the first load")
        manager.registerAdmissionCheck(check)
        compareAll("before the first load, with a check")
        for round in 0..<60 {
            switch generator.next() % 8 {
            case 0: source.load(policySets[Int(generator.next() % UInt64(policySets.count))])
            case 1:
                let account = accounts[Int(generator.next() % UInt64(accounts.count))]
                let reasons: [BlockAccountReason] = [.blockedByAdministrator, .clockedOut, .admissionCheckFailed]
                manager.blockAccount(account, reason: reasons[Int(generator.next() % 3)])
            case 2: manager.unblockAccount(accounts[Int(generator.next() % UInt64(accounts.count))])
            case 3: manager.allowedAccounts = generator.next() % 2 == 0 ? nil : [alice, carol, erinOfContoso, .unmanaged]
            case 4: manager.admissionChecks = generator.next() % 2 == 0 ? [] : [check]
            case 5:
                verdict.withLock { $0 = generator.next() % 2 == 0 ? .admit : .deny("no") }
                _ = try? await manager.withAdmittedIdentity(accounts[Int(generator.next() % UInt64(accounts.count))]) {}
            case 6: _ = try? await manager.withAdmittedIdentity(alice) {}
            default:
                var changed = manager.settings
                changed.admissionRetryInterval = generator.next() % 2 == 0 ? 0 : 30
                manager.settings = changed
            }
            compareAll("round \(round)")
        }
        #expect(compared == 62 * accounts.count * 2)
    }

    @Test("a cached pass survives checks being removed, and is forgotten when checks are added back")
    func passesAndChangingChecks() async throws {
        let check = CountingAdmissionCheck()
        let manager = admissionManager(check, cache: 3_600)
        try await manager.withAdmittedIdentity(alice) {}
        #expect(check.runs.count == 1)
        manager.admissionChecks = []
        #expect(try manager.admitWithoutWaiting(alice))
        try await manager.withAdmittedIdentity(alice) {}
        manager.registerAdmissionCheck(check)
        // Changing the checks forgets every pass: the next admission asks them again.
        #expect(try manager.admitWithoutWaiting(alice) == false)
        try await manager.withAdmittedIdentity(alice) {}
        #expect(check.runs.count == 2)
        #expect(try manager.admitWithoutWaiting(alice))
        try await manager.withAdmittedIdentity(alice) {}
        #expect(check.runs.count == 2)
    }

    @Test("a cached pass admits nobody the rule refuses: blocked, outside the allow list, or undecided")
    func passDoesNotOutrankRefusals() async throws {
        let check = CountingAdmissionCheck()
        var settings = RuntimeSettings()
        settings.admissionCacheDuration = 3_600
        let source = LatePolicySource()
        source.load(tenants: ["contoso.com": ownedPolicy("contoso")])
        let manager = PolicyManager(settings: settings, policySource: source)
        manager.registerAdmissionCheck(check)
        try await manager.withAdmittedIdentity(alice) {}
        try await manager.withAdmittedIdentity(bob) {}
        #expect(check.runs.count == 2)
        manager.blockAccount(alice, reason: .clockedOut)
        await #expect(throws: AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.clockedOut))) {
            try await manager.withAdmittedIdentity(alice) {}
        }
        manager.allowedAccounts = [alice]
        await #expect(throws: AdmissionError(account: bob, result: .notAllowed, cause: .notInAllowedAccounts)) {
            try await manager.withAdmittedIdentity(bob) {}
        }
        manager.allowedAccounts = nil
        source.load(PolicySet(unavailableTenants: ["contoso.com"]))
        do {
            try await manager.withAdmittedIdentity(bob) {}
            Issue.record("an undecided account was admitted")
        } catch let error as AdmissionError {
            #expect(error.result == .failed)
            guard case .unavailable = error.cause else { Issue.record("\(error.cause)"); return }
        }
        #expect(throws: AdmissionError.self) { try manager.admitWithoutWaiting(bob) }
        source.load(tenants: ["contoso.com": ownedPolicy("contoso")])
        try await manager.withAdmittedIdentity(bob) {}
        #expect(check.runs.count == 2)
    }

    @Test("a denial blocks within the retry interval even with no checks left; an account its policy blocks is never retried")
    func denialsAndPolicyBlocks() async throws {
        let check = CountingAdmissionCheck { _ in .deny("suspended") }
        let manager = admissionManager(check, retry: 3_600)
        await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(alice) {} }
        manager.admissionChecks = []
        await #expect(throws: AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.admissionCheckFailed))) {
            try await manager.withAdmittedIdentity(alice) {}
        }
        #expect(throws: AdmissionError.self) { try manager.admitWithoutWaiting(alice) }

        // A denial older than the retry interval is retried, unless the account's policy blocks it now.
        let source = LatePolicySource()
        source.load([carol: ownedPolicy("carol")])
        var settings = RuntimeSettings()
        settings.admissionRetryInterval = 0
        let blocking = PolicyManager(settings: settings, policySource: source)
        let carolCheck = CountingAdmissionCheck { _ in .deny("suspended") }
        blocking.registerAdmissionCheck(carolCheck)
        await #expect(throws: AdmissionError(account: carol, result: .failed, cause: .denied("suspended"))) {
            try await blocking.withAdmittedIdentity(carol) {}
        }
        #expect(blocking.blockReason(for: carol) == .admissionCheckFailed)
        source.load([carol: Policy(identity: nil, isAccountBlocked: true)])
        for _ in 0..<2 {
            await #expect(throws: AdmissionError(account: carol, result: .notAllowed, cause: .blocked(.admissionCheckFailed))) {
                try await blocking.withAdmittedIdentity(carol) {}
            }
        }
        #expect(carolCheck.runs.count == 1)
        source.load([carol: ownedPolicy("carol")])
        await #expect(throws: AdmissionError(account: carol, result: .failed, cause: .denied("suspended"))) {
            try await blocking.withAdmittedIdentity(carol) {}
        }
        #expect(carolCheck.runs.count == 2)
    }

    @Test("before the first load nobody but the unmanaged identity is admitted, with checks or without")
    func beforeTheFirstLoad() async throws {
        let manager = PolicyManager(policySource: LatePolicySource())
        for checks in [[], [CountingAdmissionCheck() as any AdmissionCheck]] {
            manager.admissionChecks = checks
            for account in [alice, dave, Identity("svc-backup")] {
                #expect(throws: AdmissionError.self) { try manager.admitWithoutWaiting(account) }
                await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(account) {} }
            }
            #expect(try manager.admitWithoutWaiting(.unmanaged))
        }
    }
}
