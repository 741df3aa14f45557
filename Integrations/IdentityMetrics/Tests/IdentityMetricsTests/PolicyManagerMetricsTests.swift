import Foundation
import IdentityMetrics
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import MetricsTestKit
import Testing

typealias Names = IdentityMetricNames

@Suite("PolicyManagerMetrics: admissions, refusals, blocks, policy reloads and errors, wipes")
struct PolicyManagerMetricsTests {
    @Test("each admission and each refusal is counted once, by code, cause, block reason and tenant")
    func admissionsAndRefusals() async throws {
        let (test, metrics) = makeMetrics()
        let manager = makeManager { $0 == carol ? .deny("token revoked for carol@fabrikam.com") : .admit }
        _ = metrics.observe(manager)
        for account in [alice, alice, alice, bob, bob, serviceAccount] { try await manager.withAdmittedIdentity(account) {} }
        manager.blockAccount(bob, reason: .blockedByAdministrator)
        for account in [carol, carol, bob] {
            await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(account, reason: "GET /\(account.name)") {} }
        }
        // An error of the operation is no refusal: the admission is counted.
        await #expect(throws: CancellationError.self) { try await manager.withAdmittedIdentity(alice) { throw CancellationError() } }

        #expect(test.total(Names.admissions, [("tenant", "contoso.com")]) == 6)
        #expect(test.total(Names.admissions, [("tenant", "none")]) == 1)
        #expect(test.counterTotal(label: Names.admissions) == 7)
        #expect(test.total(Names.admissionRefusals, [("code", "3"), ("cause", "denied"), ("block_reason", "none"), ("tenant", "fabrikam.com")]) == 1)
        #expect(test.total(Names.admissionRefusals, [
            ("code", "2"), ("cause", "blocked"), ("block_reason", "admissionCheckFailed"), ("tenant", "fabrikam.com"),
        ]) == 1)
        #expect(test.total(Names.admissionRefusals, [
            ("code", "2"), ("cause", "blocked"), ("block_reason", "blockedByAdministrator"), ("tenant", "contoso.com"),
        ]) == 1)
        #expect(test.counterTotal(label: Names.admissionRefusals) == 3)
        test.expectNoDimension(containing: accounts.map(\.name) + ["token revoked", "GET /"])
    }

    @Test("an account outside the allowed accounts: notInAllowedAccounts")
    func otherCauses() async throws {
        let (test, metrics) = makeMetrics()
        let manager = makeManager()
        _ = metrics.observe(manager)
        manager.allowedAccounts = [alice]
        await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(bob) {} }
        #expect(test.total(Names.admissionRefusals, [
            ("code", "2"), ("cause", "notInAllowedAccounts"), ("block_reason", "none"), ("tenant", "contoso.com"),
        ]) == 1)
    }

    @Test("blocks and unblocks are counted once each, by reason; the gauge follows the blocked accounts")
    func blocksAndUnblocks() async throws {
        let (test, metrics) = makeMetrics()
        let manager = makeManager()
        manager.blockAccount(carol, reason: .clockedOut)         // before the metrics: in the gauge, not counted
        let service = metrics.observe(manager)
        manager.blockAccount(alice, reason: .clockedOut)
        manager.blockAccount(alice, reason: .clockedOut)         // no change, no event
        manager.blockAccount(bob, reason: .blockedByAdministrator)
        manager.unblockAccount(alice, reason: .clockedOut)
        manager.unblockAccount(carol)
        await whileRunning(service) {
            #expect(await eventually { test.counterTotal(label: Names.accountUnblocks) == 2 })
        }
        #expect(test.total(Names.accountBlocks, [("reason", "clockedOut"), ("tenant", "contoso.com")]) == 1)
        #expect(test.total(Names.accountBlocks, [("reason", "blockedByAdministrator"), ("tenant", "contoso.com")]) == 1)
        #expect(test.counterTotal(label: Names.accountBlocks) == 2)
        #expect(test.total(Names.accountUnblocks, [("reason", "clockedOut"), ("tenant", "contoso.com")]) == 1)
        #expect(test.total(Names.accountUnblocks, [("reason", "clockedOut"), ("tenant", "fabrikam.com")]) == 1)
        let gauge = try test.expectGauge(Names.blockedAccounts)
        #expect(gauge.values.map(Int.init) == [1, 2, 3, 2, 1])
        test.expectNoDimension(containing: accounts.map(\.name))
    }

    @Test("policy reloads and policy errors: the gauge is the errors now, each new error reported once")
    func policyReloadsAndErrors() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("identity-metrics-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func write(_ name: String, _ text: String) throws { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
        try write("alice.json", #"{"formatVersion": 1, "account": "alice@contoso.com"}"#)
        let manager = PolicyManager(policySource: try DirectoryPolicySource(directory: directory))
        let (test, metrics) = makeMetrics()
        let service = metrics.observe(manager)
        try await whileRunning(service) {
            try write("bob.json", #"{"formatVersion": 1, "account": "bob@contoso.com"}"#)
            try await manager.reloadPolicies()
            #expect(await eventually { test.total(Names.policyReloads) == 1 })
            try write("carol.json", #"{"formatVersion": 1, "account": "carol@fabrikam.com", "fileEncryptionRequired": "yes"}"#)
            try await manager.reloadPolicies()
            try await manager.reloadPolicies()                       // the same error again: not new
            #expect(await eventually { test.total(Names.policyErrorReports) == 1 })
            try FileManager.default.removeItem(atPath: directory + "/carol.json")
            try await manager.reloadPolicies()
            #expect(await eventually { (try? test.expectGauge(Names.policyErrors).lastValue) == 0 })
        }
        #expect(try test.expectGauge(Names.policyErrors).values == [0, 1, 0])
        #expect(test.total(Names.policyErrorReports) == 1)
        test.expectNoDimension(containing: accounts.map(\.name))
    }

    @Test("a wipe is counted once per account, by outcome and tenant, with its duration; a search's leftovers by tenant")
    func wipes() async throws {
        let (test, metrics) = makeMetrics()
        let manager = makeManager()
        _ = metrics.observe(manager)
        await manager.wipeData(forAccount: alice)
        let tenantReport = await manager.wipeData(forTenant: "contoso.com")
        #expect(test.total(Names.wipes, [("outcome", "complete"), ("tenant", "contoso.com")]) == Int64(1 + tenantReport.accounts.count))
        #expect(try test.expectTimer(Names.wipeDuration, [("scope", "account")]).values.count == 1)
        #expect(try test.expectTimer(Names.wipeDuration, [("scope", "tenant")]).values.count == 1)
        // What a tenant's search could not read counts as leftovers of that tenant.
        let leftover = WipeLeftover(path: "/srv/documents/carol@fabrikam.com", owner: nil, error: .ioFailure(path: "/srv", operation: "opendir", errno: 13))
        manager.observer?.didWipe([], tenant: "fabrikam.com", unreadable: [leftover, leftover], duration: .milliseconds(3))
        #expect(test.total(Names.wipeLeftovers, [("tenant", "fabrikam.com")]) == 2)
        test.expectNoDimension(containing: accounts.map(\.name))
    }

    @Test("tenant dimension off: no metric has one, and the counts are the same")
    func tenantOff() async throws {
        let (test, metrics) = makeMetrics(.disabled)
        let manager = makeManager { $0 == carol ? .deny("no") : .admit }
        let service = metrics.observe(manager)
        for account in [alice, bob, serviceAccount] { try await manager.withAdmittedIdentity(account) {} }
        await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(carol) {} }
        manager.blockAccount(alice, reason: .clockedOut)
        manager.unblockAccount(alice)
        await manager.wipeData(forAccount: bob)
        await whileRunning(service) {
            #expect(await eventually { test.counterTotal(label: Names.accountUnblocks) == 1 })
        }
        #expect(test.total(Names.admissions) == 3)
        #expect(test.total(Names.admissionRefusals, [("code", "3"), ("cause", "denied"), ("block_reason", "none")]) == 1)
        #expect(test.total(Names.accountBlocks, [("reason", "clockedOut")]) == 1)
        #expect(test.total(Names.wipes, [("outcome", "complete")]) == 1)
        #expect(!test.allDimensions.contains { $0.contains(" tenant=") })
    }

    @Test("the tenant dimension is bounded: tenants past the limit are other, a domain-less account's is none")
    func tenantLimit() async throws {
        let (test, metrics) = makeMetrics(.enabled(maximumTenants: 1))
        let manager = makeManager()
        _ = metrics.observe(manager)
        for account in [alice, carol, "dave@northwind.com", serviceAccount, bob] { try await manager.withAdmittedIdentity(account) {} }
        #expect(test.total(Names.admissions, [("tenant", "contoso.com")]) == 2)
        #expect(test.total(Names.admissions, [("tenant", "other")]) == 2)
        #expect(test.total(Names.admissions, [("tenant", "none")]) == 1)
        test.expectNoDimension(containing: accounts.map(\.name) + ["dave"])
    }

    @Test("run() twice: the second returns at once; cancellation ends the first")
    func runOnce() async {
        let (_, metrics) = makeMetrics()
        let service = metrics.observe(makeManager())
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await service.run() }
            group.addTask { await service.run() }
            await group.next()          // the call that found the events taken
            group.cancelAll()           // ends the other
        }
    }
}
