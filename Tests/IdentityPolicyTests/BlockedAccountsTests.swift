import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// A delegate that records every `blockAccount` call and answers `answer`.
final class BlockRecordingDelegate: PolicyDelegate {
    let calls = Recorder<String>()
    let restarts = Recorder<Bool>()
    let answer: BlockAccountResult?

    init(answer: BlockAccountResult? = .success) {
        self.answer = answer
    }

    func blockAccount(
        _ account: Identity, reason: BlockAccountReason, window: WindowID?,
        completionHandler: @escaping @Sendable (BlockAccountResult) -> Void
    ) {
        calls.append("\(account.name) \(reason) \(window?.rawValue ?? "nil")")
        if let answer { completionHandler(answer) }
    }

    func identitySwitchRequired(
        _ identity: Identity, reason: IdentitySwitchReason, window: WindowID,
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void
    ) {
        completionHandler(.success)
    }

    func restartApplication() -> Bool {
        restarts.append(true)
        return true
    }
}

/// A manager managing alice and carol (own policies), with protection managers whose policy is the manager.
struct BlockFixture {
    let directory: TemporaryDirectory
    let manager: PolicyManager
    let data: DataProtectionManager
    let files: FileProtectionManager
    let delegate: BlockRecordingDelegate
    let source: StaticPolicySource

    init(answer: BlockAccountResult? = .success, timeout: TimeInterval = 120) throws {
        directory = try TemporaryDirectory()
        source = StaticPolicySource([alice: ownedPolicy("alice"), carol: ownedPolicy("carol")])
        var settings = RuntimeSettings()
        settings.delegateTimeout = timeout
        manager = PolicyManager(settings: settings, policySource: source)
        delegate = BlockRecordingDelegate(answer: answer)
        manager.delegate = delegate
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        data = DataProtectionManager(keyStore: keys, policy: manager)
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        files = try FileProtectionManager(roots: [directory.file("root")], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
    }
}

@Suite("Blocked accounts (article AccountsAndPolicies)")
struct BlockedAccountsTests {
    @Test("a failing check blocks the account: listed, delegate told once, switch and runtime switch not allowed, data refused")
    func failingCheckBlocks() async throws {
        let f = try BlockFixture()
        f.manager.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { _, _ in .fails }]
        let sealed = try f.data.protect(Data("alice's".utf8), owner: alice)
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: f.directory.file("root/a.txt"), contents: Data("a".utf8)) }
        let events = f.manager.events
        #expect(await switchUI(f.manager, alice, window: "w") == .failed)
        #expect(f.manager.blockedAccounts == [alice])
        #expect(f.manager.blockReason(for: alice) == .conditionalLaunchBlocked)
        #expect(f.manager.blockReason(for: carol) == .notBlocked)
        #expect(await eventually { f.delegate.calls.count == 1 })
        #expect(f.delegate.calls.all == ["alice@contoso.com conditionalLaunchBlocked w"])
        #expect(await switchUI(f.manager, alice, window: "w") == .notAllowed)
        #expect(await f.manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") == .notAllowed)
        #expect(throws: ProtectionError.accountBlocked(identity: alice, reason: 1)) { try f.data.unprotect(sealed) }
        #expect(throws: ProtectionError.accountBlocked(identity: alice, reason: 1)) { try f.data.protect(Data("x".utf8), owner: alice) }
        #expect(throws: ProtectionError.accountBlocked(identity: alice, reason: 1)) { try f.files.readFile(atPath: f.directory.file("root/a.txt")) }
        #expect((try? f.data.protect(Data("c".utf8), owner: carol)) != nil)   // another account is unaffected
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .accountBlocked(alice, reason: .conditionalLaunchBlocked))
        f.manager.unblockAccount(alice)
        #expect(await iterator.next() == .accountUnblocked(alice))
        #expect(f.manager.blockedAccounts.isEmpty)
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.data.unprotect(sealed) } == Data("alice's".utf8))
        #expect(f.delegate.calls.count == 1)
    }

    @Test("a cancelled check blocks with conditionalLaunchCanceled; a superseded switch blocks nothing")
    func cancelledCheck() async throws {
        let f = try BlockFixture()
        let gate = Gate()
        f.manager.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { identity, _ in
            if identity == carol { await gate.wait(); return .fails }
            return .cancels
        }]
        #expect(await switchUI(f.manager, alice, window: "w") == .canceled)
        #expect(f.manager.blockReason(for: alice) == .conditionalLaunchCanceled)
        let superseded = Recorder<SwitchIdentityResult>()
        f.manager.setUIPolicyIdentity(carol, for: "v") { superseded.append($0) }
        #expect(await eventually { gate.entered == 1 })
        #expect(await switchUI(f.manager, dave, window: "v") == .success)
        gate.open()
        #expect(await eventually { superseded.count == 1 })
        #expect(superseded.all == [.canceled])
        #expect(f.manager.blockReason(for: carol) == .notBlocked)
    }

    @Test("several causes: blocked until every one clears; the lowest raw value is the reason")
    func severalCauses() throws {
        let f = try BlockFixture()
        f.manager.blockAccount(carol, reason: .blockedByAdministrator)
        f.manager.blockAccount(carol, reason: .clockedOut)
        #expect(f.manager.blockReason(for: carol) == .clockedOut)
        f.manager.unblockAccount(carol, reason: .clockedOut)
        #expect(f.manager.blockReason(for: carol) == .blockedByAdministrator)
        f.manager.unblockAccount(carol, reason: .blockedByAdministrator)
        #expect(f.manager.blockReason(for: carol) == .notBlocked)
        f.manager.blockAccount(carol, reason: .notBlocked)
        f.manager.blockAccount(carol, reason: .blockedByPolicy)
        f.manager.blockAccount(.unmanaged, reason: .clockedOut)
        #expect(f.manager.blockedAccounts.isEmpty)
    }

    @Test("a policy that blocks the account blocks it; a policy without it unblocks it, with notifications")
    func blockedByPolicy() async throws {
        let f = try BlockFixture()
        let notes = Recorder<String>()
        let token = f.manager.notificationCenter.addObserver(forName: .blockedAccountsDidChange, object: f.manager, queue: nil) { note in
            notes.append("\(note.userInfo?["account"] as? String ?? "?") \(note.userInfo?["reason"] as? Int ?? -1)")
        }
        defer { f.manager.notificationCenter.removeObserver(token) }
        var blocking = ownedPolicy("alice")
        blocking.isAccountBlocked = true
        f.source.setPolicy(blocking, for: alice)
        #expect(f.manager.blockReason(for: alice) == .blockedByPolicy)
        #expect(await switchUI(f.manager, alice, window: "w") == .notAllowed)
        f.source.setPolicy(ownedPolicy("alice"), for: alice)
        #expect(f.manager.blockReason(for: alice) == .notBlocked)
        #expect(notes.all == ["alice@contoso.com 100", "alice@contoso.com -1"])
        #expect(await eventually { f.delegate.calls.count == 1 })
        #expect(f.delegate.calls.all == ["alice@contoso.com blockedByPolicy nil"])
    }

    @Test("a delegate that answers failed, or not at all: the account stays blocked and a restart is requested")
    func delegateFails() async throws {
        for (answer, timeout) in [(BlockAccountResult?.some(.failed), 120.0), (nil, 0.05)] {
            let f = try BlockFixture(answer: answer, timeout: timeout)
            f.manager.blockAccount(alice, reason: .clockedOut)
            #expect(await eventually { f.delegate.restarts.count == 1 })
            #expect(f.manager.blockReason(for: alice) == .clockedOut)
        }
    }

    @Test("a wipe clears the account's conditional-launch blocks, not the others; the wiped account stays blocked as wiped")
    func wipeClearsConditionalLaunch() async throws {
        let f = try BlockFixture()
        f.manager.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { _, _ in .fails }]
        #expect(await switchUI(f.manager, alice, window: "w") == .failed)
        f.manager.blockAccount(carol, reason: .clockedOut)
        await f.manager.wipeData(forAccount: alice)
        await f.manager.wipeData(forAccount: carol)
        #expect(f.manager.blockedAccounts == [alice, carol])
        #expect(f.manager.blockReason(for: alice) == .wiped)
        #expect(f.manager.blockReason(for: carol) == .clockedOut)
        f.manager.unblockAccount(alice, reason: .wiped)
        #expect(f.manager.blockReason(for: alice) == .notBlocked)
    }

    @Test("BlockAccountReason and BlockAccountResult raw values")
    func rawValues() {
        #expect(BlockAccountReason.allCases.map(\.rawValue) == [0, 1, 2, 3, 100, 101, 102, 103])
        #expect(BlockAccountResult.success.rawValue == 0 && BlockAccountResult.failed.rawValue == 1)
        #expect(ProtectionError.accountBlocked(identity: alice, reason: 3).code == 109)
    }
}

@Suite("Per-account events (article AccountsAndPolicies)")
struct AccountEventTests {
    @Test("policies added and removed: policyDidChange names the accounts and tenants; managed and unmanaged events follow")
    func managedEvents() async {
        let source = StaticPolicySource()
        let manager = PolicyManager(policySource: source)
        let infos = Recorder<[String]>()
        let token = manager.notificationCenter.addObserver(forName: .policyDidChange, object: manager, queue: nil) { note in
            infos.append((note.userInfo?["accounts"] as? [String] ?? []) + (note.userInfo?["tenants"] as? [String] ?? []))
        }
        defer { manager.notificationCenter.removeObserver(token) }
        let events = manager.events
        source.setPolicy(ownedPolicy("alice"), for: alice)
        source.setPolicy(ownedPolicy("fabrikam"), forTenant: "fabrikam.com")
        source.setPolicy(nil, for: alice)
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .policyDidChange)
        #expect(await iterator.next() == .accountPoliciesDidChange(accounts: [alice], tenants: []))
        #expect(await iterator.next() == .accountManaged(alice))
        #expect(await iterator.next() == .policyDidChange)
        #expect(await iterator.next() == .accountPoliciesDidChange(accounts: [], tenants: ["fabrikam.com"]))
        #expect(await iterator.next() == .policyDidChange)
        #expect(await iterator.next() == .accountPoliciesDidChange(accounts: [alice], tenants: []))
        #expect(await iterator.next() == .accountUnmanaged(alice))
        #expect(infos.all == [["alice@contoso.com"], ["fabrikam.com"], ["alice@contoso.com"]])
    }

    @Test("a registered account of a tenant whose document changes is named in the change")
    func tenantAccountsNamed() async {
        let source = StaticPolicySource()
        let manager = PolicyManager(policySource: source)
        manager.registerAccount(erin)
        let events = manager.events
        source.setPolicy(ownedPolicy("fabrikam"), forTenant: "fabrikam.com")
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .policyDidChange)
        #expect(await iterator.next() == .accountPoliciesDidChange(accounts: [erin], tenants: ["fabrikam.com"]))
        #expect(await iterator.next() == .accountManaged(erin))
    }
}
