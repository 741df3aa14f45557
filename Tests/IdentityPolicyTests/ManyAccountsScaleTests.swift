import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Synchronization
import Testing

/// Many accounts and tenants at once, with the documents changing and many threads deciding.
@Suite("Many managed accounts at scale: 1,000 accounts in 50 tenants, 10,000 switches and blocks, 10,000 policies")
struct ManyAccountsScaleTests {
    static let accountCount = 1_000
    static let tenantCount = 50

    static func account(_ index: Int) -> Identity { Identity("user\(index)@tenant\(index % tenantCount).example") }
    /// Even accounts have a document of their own; odd ones get their tenant's.
    static func hasOwnDocument(_ index: Int) -> Bool { index.isMultiple(of: 2) }
    static func ownEncrypts(_ index: Int) -> Bool { index.isMultiple(of: 4) }
    static func tenantEncrypts(_ tenant: Int) -> Bool { tenant.isMultiple(of: 3) }

    static func accountDocument(_ index: Int, version: Int) -> String {
        """
        {"formatVersion": 1, "account": "\(account(index).name)", "fileEncryptionRequired": \(ownEncrypts(index)),
         "saveToLocations": ["\(index.isMultiple(of: 3) ? "localDrive" : "box")"],
         "appConfiguration": {"owner": "account \(index)", "version": \(version)}}
        """
    }

    static func tenantDocument(_ tenant: Int, version: Int) -> String {
        """
        {"formatVersion": 1, "tenant": "tenant\(tenant).example", "fileEncryptionRequired": \(tenantEncrypts(tenant)),
         "saveToLocations": ["\(tenant.isMultiple(of: 2) ? "localDrive" : "cameraRoll")"],
         "appConfiguration": {"owner": "tenant \(tenant)", "version": \(version)}}
        """
    }

    /// Version 0 writes every document; version 1...4 rewrites every tenant's and a quarter of the accounts'
    /// (each account document is rewritten once over the four).
    static func writeDocuments(_ directory: TemporaryDirectory, version: Int) throws {
        for index in 0..<accountCount where hasOwnDocument(index) && (version == 0 || (index / 2) % 4 == version % 4) {
            try directory.write("account-\(index).json", accountDocument(index, version: version))
        }
        for tenant in 0..<tenantCount {
            try directory.write("tenant-\(tenant).json", tenantDocument(tenant, version: version))
        }
    }

    /// The version of the document in force for account `index` after version 4 was written.
    static func finalVersion(_ index: Int) -> Int {
        guard hasOwnDocument(index) else { return 4 }
        let residue = (index / 2) % 4
        return residue == 0 ? 4 : residue
    }

    /// What `policy` must say for account `index`, whatever the document version.
    static func mixUps(_ policy: Policy, index: Int) -> Int {
        let tenant = index % tenantCount
        let owner = hasOwnDocument(index) ? "account \(index)" : "tenant \(tenant)"
        let encrypts = hasOwnDocument(index) ? ownEncrypts(index) : tenantEncrypts(tenant)
        let localDrive = hasOwnDocument(index) ? index.isMultiple(of: 3) : tenant.isMultiple(of: 2)
        var wrong = 0
        if policy.appConfigurationValue(forKey: "owner") != .string(owner) { wrong += 1 }
        if policy.identity != account(index) { wrong += 1 }
        if policy.isFileEncryptionRequired != encrypts { wrong += 1 }
        if policy.isSaveToAllowed(for: .localDrive) != localDrive { wrong += 1 }
        return wrong
    }

    @Test("every decision uses the account's own policy or its tenant's while the documents change on disk: 0 mix-ups")
    func decisionsWhileDocumentsChange() async throws {
        let directory = try TemporaryDirectory()
        let policies = try TemporaryDirectory()
        try Self.writeDocuments(policies, version: 0)
        let source = try DirectoryPolicySource(directory: policies.path)
        source.reload()
        #expect(source.errors.isEmpty)
        let manager = PolicyManager(policySource: source)
        for index in stride(from: 1, to: Self.accountCount, by: 2) { manager.registerAccount(Self.account(index)) }
        #expect(manager.managedAccounts.count == Self.accountCount)
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        let files = try FileProtectionManager(
            roots: [directory.file("root")], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))

        final class Counters: Sendable {
            let mixUps = Atomic<Int>(0)
            let decisions = Atomic<Int>(0)
            let writerDone = Atomic<Bool>(false)
        }
        let counters = Counters()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for version in 1...4 {
                    try? Self.writeDocuments(policies, version: version)
                    source.reload()
                }
                counters.writerDone.store(true, ordering: .releasing)
            }
            for reader in 0..<4 {
                group.addTask {
                    var generator = SystemRandomNumberGenerator()
                    var rounds = 0
                    while !counters.writerDone.load(ordering: .acquiring) || rounds < 2_000 {
                        let index = Int.random(in: 0..<Self.accountCount, using: &generator)
                        counters.mixUps.add(Self.mixUps(manager.policy(for: Self.account(index)), index: index), ordering: .relaxed)
                        counters.decisions.add(1, ordering: .relaxed)
                        rounds += 1
                        if rounds.isMultiple(of: 50), reader == 0 {
                            let path = directory.file("root/\(index)-\(rounds).txt")
                            let identity = Self.account(index)
                            let encrypted = try? IdentityContext.withThreadIdentity(identity) { () throws(ProtectionError) -> Bool in
                                try files.writeFile(atPath: path, contents: Data("data of \(identity.name)".utf8))
                                return try files.isFileEncrypted(atPath: path)
                            }
                            let expected = Self.hasOwnDocument(index) ? Self.ownEncrypts(index) : Self.tenantEncrypts(index % Self.tenantCount)
                            if encrypted != expected { counters.mixUps.add(1, ordering: .relaxed) }
                        }
                    }
                }
            }
        }
        #expect(counters.mixUps.load(ordering: .relaxed) == 0)
        #expect(counters.decisions.load(ordering: .relaxed) >= 8_000)
        for index in 0..<Self.accountCount {
            let policy = manager.policy(for: Self.account(index))
            #expect(Self.mixUps(policy, index: index) == 0)
            #expect(policy.appConfigurationValue(forKey: "version") == .number(Double(Self.finalVersion(index))))
        }
    }

    @Test("10,000 concurrent switches and blocks over 1,000 accounts: every completion handler runs exactly once")
    func concurrentSwitchesAndBlocks() async {
        let accounts = (0..<Self.accountCount).map(Self.account)
        let source = StaticPolicySource(Dictionary(uniqueKeysWithValues: accounts.map { ($0, ownedPolicy($0.name)) }))
        let manager = PolicyManager(policySource: source)
        manager.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { identity, _ in
            await Task.yield()
            return identity.name.hasPrefix("user7") ? .fails : .passes
        }]
        let calls = 10_000
        let counts = LockedValue([Int](repeating: 0, count: calls))
        let results = LockedValue([SwitchIdentityResult: Int]())
        let switches = (0..<calls).filter { !$0.isMultiple(of: 10) }.count
        let done = LockedValue(0)
        DispatchQueue.concurrentPerform(iterations: calls) { index in
            let account = accounts[(index &* 7_919) % accounts.count]
            if index.isMultiple(of: 10) {
                if index.isMultiple(of: 20) {
                    manager.blockAccount(account, reason: .blockedByAdministrator)
                } else {
                    manager.unblockAccount(account)
                }
                return
            }
            manager.setUIPolicyIdentity(account, for: WindowID("window-\(index % 64)")) { result in
                counts.withLock { $0[index] += 1 }
                results.withLock { $0[result, default: 0] += 1 }
                done.withLock { $0 += 1 }
            }
        }
        #expect(await eventually { done.withLock { $0 } == switches })
        try? await Task.sleep(for: .milliseconds(50))
        #expect(done.withLock { $0 } == switches)
        #expect(counts.withLock { $0 }.enumerated().allSatisfy { index, count in count == (index.isMultiple(of: 10) ? 0 : 1) })
        let tally = results.withLock { $0 }
        #expect(tally.values.reduce(0, +) == switches)
        #expect(tally[.success, default: 0] > 0)
        for window in 0..<64 {
            if let shown = manager.uiPolicyIdentity(for: WindowID("window-\(window)")) {
                #expect(!shown.name.hasPrefix("user7"))   // a failing account is never shown
            }
        }
    }

    @Test("10,000 managed accounts with distinct policies: each gets its own, and isIdentityManaged holds for each")
    func tenThousandAccounts() {
        let accounts = (0..<10_000).map { Identity("member\($0)@org\($0 % 100).example") }
        let source = StaticPolicySource(Dictionary(uniqueKeysWithValues: accounts.map { ($0, ownedPolicy($0.name)) }))
        let manager = PolicyManager(policySource: source)
        #expect(manager.managedAccounts.count == 10_000)
        var wrong = 0
        for account in accounts {
            if !manager.isIdentityManaged(account) { wrong += 1 }
            if manager.policy(for: account).appConfigurationValue(forKey: "owner") != .string(account.name) { wrong += 1 }
        }
        #expect(wrong == 0)
        #expect(!manager.isIdentityManaged("member10000@org0.example"))
    }
}
