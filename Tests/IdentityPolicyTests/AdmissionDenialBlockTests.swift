import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("A denial and its block are one step")
struct AdmissionDenialBlockTests {
    @Test("checks that deny and pass in turn, with runs one after another: once they pass, every account is admitted again, none left blocked")
    func denialsAndPassesInTurn() async throws {
        var settings = RuntimeSettings()
        // Every admission runs the checks, and a denial is retried at once: runs of one account follow each other
        // as closely as they can, each recording its outcome and setting or lifting the block.
        settings.admissionCacheDuration = 0
        settings.admissionRetryInterval = 0
        let accounts = (0..<8).map { Identity("user\($0)@contoso.com") }
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource(tenants: ["contoso.com": ownedPolicy("contoso")]))
        let passing = LockedValue(false)
        let turns = LockedValue(0)
        manager.admissionChecks = [CountingAdmissionCheck { _ in
            if passing.withLock({ $0 }) { return .admit }
            return turns.withLock { $0 += 1; return $0 } % 2 == 0 ? .admit : .deny("every other run")
        }]
        await withTaskGroup(of: Void.self) { group in
            for account in accounts {
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<150 {
                            try? await manager.withAdmittedIdentity(account) {}
                        }
                    }
                }
            }
        }
        passing.withLock { $0 = true }
        for account in accounts {
            // A block left behind by a denial whose record a pass had replaced would refuse this for good.
            var admitted = false
            do { try await manager.withAdmittedIdentity(account) { admitted = true } } catch { Issue.record("\(account.name): \(error)") }
            #expect(admitted)
            #expect(manager.blockReason(for: account) == .notBlocked, "\(account.name)")
        }
        #expect(turns.withLock { $0 } > 100)
    }
}
