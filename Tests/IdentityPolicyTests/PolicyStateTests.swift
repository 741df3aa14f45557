import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// A state with `policies` loaded, isolation on.
private func loadedState(_ policies: PolicySet = .empty, settings: RuntimeSettings = RuntimeSettings()) -> PolicyState {
    var settings = settings
    settings.dataIsolation = true
    var state = PolicyState(scope: .isolated, settings: settings)
    _ = state.accounts.setPolicies(policies)
    return state
}

/// contoso.com's tenant policy: its data goes to managed accounts of the tenant only.
private let contoso: PolicySet = {
    var policy = Policy.unrestricted
    policy.dataTransfer = .sameTenant
    return PolicySet(tenants: [TenantID("contoso.com"): policy])
}()

@Suite("BlockRegistry: causes, reasons, the policy's block")
struct BlockRegistryTests {
    @Test("the first cause by raw value is the reason; the last cause removed forgets the account")
    func causes() {
        var blocks = BlockRegistry()
        #expect(blocks.isEmpty && blocks.reason(for: alice, tenant: "contoso.com") == nil)
        blocks.update(alice) { $0.insert(.wiped) }
        blocks.update(alice) { $0.insert(.clockedOut) }
        #expect(blocks.causes(of: alice, tenant: "contoso.com") == [.wiped, .clockedOut])
        #expect(blocks.reason(for: alice, tenant: "contoso.com") == min(BlockAccountReason.wiped, .clockedOut))
        blocks.update(alice) { $0.remove(.wiped) }
        #expect(blocks.reason(for: alice, tenant: "contoso.com") == .clockedOut)
        blocks.update(alice) { $0.removeAll() }
        #expect(blocks.isEmpty && Array(blocks.accounts).isEmpty)
    }

    @Test("a policy that blocks the account is the reason only when no explicit cause is recorded")
    func policy() {
        var blocks = BlockRegistry()
        var blocking = Policy.unrestricted
        blocking.isAccountBlocked = true
        #expect(blocks.reason(for: alice, standing: .managed(blocking)) == .blockedByPolicy)
        #expect(blocks.reason(for: alice, standing: .managed(.unrestricted)) == nil)
        #expect(blocks.reason(for: alice, standing: .claimed) == nil)
        blocks.update(alice) { $0.insert(.clockedOut) }
        #expect(blocks.reason(for: alice, standing: .managed(blocking)) == .clockedOut)
    }
}

@Suite("AdmissionStateMachine: passes, denials, one run per account")
struct AdmissionStateMachineTests {
    let check = ClosureAdmissionCheck { _, _ in .admit }

    @Test("no checks: admitted; with checks the first admission leads and the next joins its run")
    func flights() {
        var machine = AdmissionStateMachine()
        guard case .admitted = machine.start(for: alice, at: 0) else { Issue.record("no checks must admit"); return }
        machine.checks = [check]
        guard case let .lead(flight, checks) = machine.start(for: alice, at: 0) else { Issue.record("expected lead"); return }
        #expect(checks.count == 1)
        guard case let .join(joined) = machine.start(for: alice, at: 1) else { Issue.record("expected join"); return }
        #expect(joined === flight)
        guard case .lead = machine.start(for: bob, at: 1) else { Issue.record("another account runs its own checks"); return }
    }

    @Test("a pass is trusted for the cache duration, and forgotten when the checks or the account's block change")
    func passes() {
        var machine = AdmissionStateMachine()
        machine.checks = [check]
        guard case let .lead(flight, _) = machine.start(for: alice, at: 0) else { Issue.record("expected lead"); return }
        #expect(machine.record(.admit, of: alice, flight: flight, at: 10, cacheDuration: 1) == .nothing)
        guard case .admitted = machine.start(for: alice, at: 10 + 999_999_999) else { Issue.record("pass within the cache"); return }
        guard case .lead = machine.start(for: alice, at: 10 + 1_000_000_000) else { Issue.record("pass expired"); return }
        var other = AdmissionStateMachine()
        other.checks = [check]
        guard case let .lead(second, _) = other.start(for: alice, at: 0) else { Issue.record("expected lead"); return }
        _ = other.record(.admit, of: alice, flight: second, at: 0, cacheDuration: 60)
        other.forgetPass(of: alice)
        guard case .lead = other.start(for: alice, at: 1) else { Issue.record("forgotten pass"); return }
        guard case let .lead(third, _) = other.start(for: bob, at: 0) else { Issue.record("expected lead"); return }
        _ = other.record(.admit, of: bob, flight: third, at: 0, cacheDuration: 60)
        other.checks = [check, check]
        guard case .lead = other.start(for: bob, at: 1) else { Issue.record("new checks forget every pass"); return }
    }

    @Test("a denial asks for a block, retries after the interval, and a later pass asks for the unblock")
    func denials() {
        var machine = AdmissionStateMachine()
        machine.checks = [check]
        guard case let .lead(flight, _) = machine.start(for: alice, at: 0) else { Issue.record("expected lead"); return }
        #expect(machine.record(.deny("no"), of: alice, flight: flight, at: 5, cacheDuration: 60) == .block)
        #expect(!machine.retriesDenial(of: alice, at: 5 + 1_999_999_999, retryInterval: 2))
        #expect(machine.retriesDenial(of: alice, at: 5 + 2_000_000_000, retryInterval: 2))
        #expect(!machine.retriesDenial(of: bob, at: .max, retryInterval: 0))
        guard case let .lead(retry, _) = machine.start(for: alice, at: 5 + 2_000_000_000) else { Issue.record("expected lead"); return }
        #expect(machine.record(.admit, of: alice, flight: retry, at: 6, cacheDuration: 0) == .unblock)
        guard case let .lead(undecided, _) = machine.start(for: alice, at: 7) else { Issue.record("no cache: checks again"); return }
        #expect(machine.record(.unavailable("down"), of: alice, flight: undecided, at: 7, cacheDuration: 0) == .nothing)
    }
}

@Suite("PolicyState: every decision from the state alone")
struct PolicyStateTests {
    @Test("before the first load: every owned access is policyUnavailable, transfers only between no-ones, admission refused")
    func unloaded() {
        var state = loadedState(contoso)
        state.policiesLoaded = false
        guard case .policyUnavailable = state.refusal(of: .read(reader: alice), to: alice) else { Issue.record("expected policyUnavailable"); return }
        #expect(!state.isDataTransferAllowed(from: alice, to: nil))
        #expect(!state.isDataTransferAllowed(from: nil, to: dave))
        #expect(state.isDataTransferAllowed(from: nil, to: .unmanaged))
        guard case let .refused(error) = state.admissionStep(for: dave, at: 0) else { Issue.record("expected a refusal"); return }
        #expect(error.result == .failed)
        guard case .admitted = state.admissionStep(for: .unmanaged, at: 0) else { Issue.record("unmanaged is admitted"); return }
    }

    @Test("reads and modifications: the owner and its tenant; no identity, other tenants and unmanaged accounts are denied")
    func access() {
        let state = loadedState(contoso)
        let erin: Identity = "erin@fabrikam.com"
        #expect(state.refusal(of: .read(reader: alice), to: alice) == nil)
        #expect(state.refusal(of: .read(reader: bob), to: alice) == nil)
        #expect(state.refusal(of: .create, to: alice) == nil)
        for reader in [nil, Identity.unmanaged, dave, erin] as [Identity?] {
            #expect(state.refusal(of: .read(reader: reader), to: alice) == .accessDenied(identity: alice, reader: reader))
            #expect(state.refusal(of: .modify(writer: reader), to: alice) == .accessDenied(identity: alice, reader: reader))
        }
        #expect(state.refusal(of: .transfer(to: bob), to: alice) == nil)
        #expect(state.refusal(of: .transfer(to: erin), to: alice) == .accessDenied(identity: alice, reader: erin))
        #expect(state.refusal(of: .read(reader: nil), to: dave) == nil, "unmanaged data is readable by all")
    }

    @Test("a blocked owner, reader or recipient is refused; its block reason is the one reported")
    func blocked() {
        var state = loadedState(contoso)
        state.blocks.update(bob) { $0.insert(.clockedOut) }
        #expect(state.blockReason(for: bob) == .clockedOut)
        #expect(state.refusal(of: .read(reader: bob), to: bob) == .accountBlocked(identity: bob, reason: BlockAccountReason.clockedOut.rawValue))
        #expect(state.refusal(of: .read(reader: bob), to: alice) == .accessDenied(identity: alice, reader: bob))
        #expect(state.refusal(of: .read(reader: bob), to: dave) == .accessDenied(identity: dave, reader: bob))
        #expect(state.refusal(of: .transfer(to: bob), to: alice) == .accountBlocked(identity: bob, reason: BlockAccountReason.clockedOut.rawValue))
        #expect(!state.isDataTransferAllowed(from: dave, to: bob))
        #expect(state.switchStanding(of: bob) == .refused)
        guard case let .refused(error) = state.admissionStep(for: bob, at: 0) else { Issue.record("expected a refusal"); return }
        #expect(error.cause == .blocked(.clockedOut) && error.result == .notAllowed)
    }

    @Test("switch standing and admission follow the allow list and the claim")
    func allowedAndClaimed() {
        var settings = RuntimeSettings()
        settings.allowedAccounts = [alice]
        var state = loadedState(contoso, settings: settings)
        #expect(state.switchStanding(of: alice) == .managed)
        #expect(state.switchStanding(of: bob) == .refused)
        #expect(state.switchStanding(of: .unmanaged) == .unmanaged)
        guard case let .refused(error) = state.admissionStep(for: bob, at: 0) else { Issue.record("expected a refusal"); return }
        #expect(error.cause == .notInAllowedAccounts)
        guard case .admitted = state.admissionStep(for: alice, at: 0) else { Issue.record("no checks: admitted"); return }
        settings.allowedAccounts = nil
        settings.maxManagedAccounts = 1
        var limited = PolicyState(scope: .isolated, settings: settings)
        _ = limited.accounts.configure(limit: 1, policyRequired: false)
        _ = limited.accounts.setPolicies(contoso)
        #expect(limited.switchStanding(of: alice) == .refused, "an account with a policy, not enrolled under a limit, is claimed")
        guard case let .refused(claimed) = limited.admissionStep(for: alice, at: 0) else { Issue.record("expected a refusal"); return }
        #expect(claimed.cause == .claimed)
    }

    @Test("an isolated state keeps its levels; it never touches IdentityContext")
    func levels() {
        var state = loadedState()
        let before = (IdentityContext.processIdentity, IdentityContext.keyWindow)
        state.setProcessIdentity(alice)
        state.setKeyWindow("inbox")
        state.publishUIIdentity(for: "inbox")
        #expect(state.processIdentity == alice && state.keyWindow == "inbox")
        #expect(IdentityContext.processIdentity == before.0 && IdentityContext.keyWindow == before.1)
        state.blocks.update(alice) { $0.insert(.wiped) }
        _ = state.reset()
        #expect(state.processIdentity == nil && state.keyWindow == .main && state.blocks.isEmpty)
    }
}

/// A decorator policy (logging, metrics, fault injection) over a policy manager.
private struct WrappingPolicy: ManagedIdentityPolicy {
    let base: PolicyManager
    func isManaged(_ identity: Identity) -> Bool { base.isManaged(identity) }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { base.isFileEncryptionRequired(for: identity) }
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? { base.refusal(of: access, to: owner) }
}

private func contosoManager() -> PolicyManager {
    PolicyManager(policySource: StaticPolicySource([:], tenants: ["contoso.com": ownedPolicy("contoso")]))
}

@Suite("No reference cycle between PolicyManager and FileProtectionManager; wipes reach released file managers")
struct ManagerCycleTests {
    @Test("a file manager whose policy is the manager, directly or through a wrapper: dropping both releases both", arguments: [false, true])
    func released(wrapped: Bool) throws {
        let directory = try TemporaryDirectory()
        weak var weakManager: PolicyManager?
        weak var weakFiles: FileProtectionManager?
        do {
            let manager = PolicyManager()
            let policy: any ManagedIdentityPolicy = wrapped ? WrappingPolicy(base: manager) : manager
            let files = try FileProtectionManager(
                roots: [directory.file("root")], keyStore: FileKeyStore(atPath: directory.file("keys")),
                policy: policy, stateDirectory: directory.file("state"))
            manager.fileProtection = files
            #expect(manager.fileProtection === files)
            weakManager = manager
            weakFiles = files
        }
        #expect(weakManager == nil)
        #expect(weakFiles == nil)
    }

    @Test("a released file manager: the wipe still deletes its files and destroys its keys; nothing is readable after re-enrollment")
    func wipeAfterRelease() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        let manager = contosoManager()
        let data = DataProtectionManager(keyStore: keys, policy: manager)
        let envelope = try IdentityContext.withThreadIdentity(alice) { try data.protect(Data("alice envelope".utf8)) }
        do {
            let files = try FileProtectionManager(roots: [root], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
            manager.fileProtection = files
            try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: root + "/a.txt", contents: Data("alice file".utf8)) }
        }
        #expect(manager.fileProtection == nil, "the file manager itself is held weakly")
        let report = await manager.wipeData(forAccount: alice)
        #expect(report.error == nil)
        #expect(report.removedFiles == [root + "/a.txt"])
        #expect(!FileManager.default.fileExists(atPath: root + "/a.txt"))
        manager.unblockAccount(alice, reason: .wiped)
        #expect(throws: ProtectionError.self) { try IdentityContext.withThreadIdentity(alice) { try data.unprotect(envelope) } }
    }

    @Test("a released file manager: a tenant wipe still finds, wipes and blocks owners the manager does not know")
    func tenantWipeAfterRelease() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        let manager = contosoManager()
        let zoe: Identity = "zoe@contoso.com"
        do {
            let files = try FileProtectionManager(roots: [root], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
            manager.fileProtection = files
            try IdentityContext.withThreadIdentity(zoe) { try files.writeFile(atPath: root + "/z.txt", contents: Data("zoe".utf8)) }
        }
        let report = await manager.wipeData(forTenant: "contoso.com")
        #expect(report.accounts.map(\.account) == [zoe])
        #expect(report.accounts.first?.removedFiles == [root + "/z.txt"])
        #expect(manager.blockReason(for: zoe) == .wiped)
        #expect(!FileManager.default.fileExists(atPath: root + "/z.txt"))
    }

    @Test("a file manager with another policy: the manager reads it while it lives, and wipes through it")
    func otherPolicy() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let policy = StaticManagedIdentityPolicy(managed: [alice], dataIsolation: false)
        let files = try FileProtectionManager(
            roots: [root], keyStore: FileKeyStore(atPath: directory.file("keys")),
            policy: policy, stateDirectory: directory.file("state"))
        let manager = PolicyManager(fileProtection: files)
        #expect(manager.fileProtection === files)
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: root + "/a.txt", contents: Data("a".utf8)) }
        let report = await manager.wipeData(forAccount: alice)
        #expect(report.removedFiles == [root + "/a.txt"])
    }
}

@Suite("PolicyState: undecided accounts (a policy document that cannot be read)")
struct UndecidedDecisionTests {
    @Test("an undecided account's data goes nowhere, not even to itself; nothing goes to it; every access is 115")
    func undecidedAccount() {
        var policies = contoso
        policies.unavailableAccounts = [alice]
        var state = loadedState(policies)
        #expect(state.accounts.standing(of: alice) == .undecided)
        #expect(!state.isTransferAllowed(from: alice, to: alice))
        #expect(!state.isTransferAllowed(from: bob, to: alice))
        #expect(!state.isDataTransferAllowed(from: alice, to: nil))
        #expect(!state.isDataTransferAllowed(from: nil, to: alice))
        for access in [ProtectedDataAccess.create, .read(reader: alice), .read(reader: bob), .modify(writer: alice), .transfer(to: bob)] {
            #expect(state.refusal(of: access, to: alice)?.code == 115, "\(access)")
        }
        #expect(state.refusal(of: .transfer(to: alice), to: bob)?.code == 115)
        #expect(state.switchStanding(of: alice) == .refused)
        guard case let .refused(error) = state.admissionStep(for: alice, at: 0), case .unavailable = error.cause else {
            Issue.record("alice was not refused as unavailable")
            return
        }
        // bob, decided by contoso's document, keeps his rules.
        #expect(state.refusal(of: .create, to: bob) == nil)
        #expect(state.switchStanding(of: bob) == .managed)
    }

    @Test("an incomplete set leaves undecided exactly the accounts without a good document of their own")
    func incomplete() {
        var policies = contoso
        policies.accounts[bob] = Policy.unrestricted
        policies.isComplete = false
        let state = loadedState(policies)
        #expect(state.accounts.standing(of: alice) == .undecided)
        #expect(state.accounts.standing(of: dave) == .undecided)
        #expect(state.accounts.isManaged(bob))
        #expect(state.refusal(of: .create, to: dave)?.code == 115)
        #expect(state.refusal(of: .create, to: bob) == nil)
        #expect(state.refusal(of: .create, to: .unmanaged) == nil)
    }
}
