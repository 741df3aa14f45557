import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import IdentityTesting
import Testing

/// Adversarial checks of the admission refusal before the policy source's first load.
@Suite("Admission before load: names that look empty, the completion-handler form, a source swapped in")
struct AdmissionBeforeLoadAttackTests {
    @Test("names that are not the unmanaged identity but look empty are refused before the first load")
    func lookAlikesOfUnmanagedAreRefused() async throws {
        let manager = PolicyManager(policySource: LatePolicySource())
        for name in ["\u{200B}", "\u{FEFF}", "\u{200D}", "\u{0301}", "\u{2060}", "\u{00AD}", "\u{180E}"] {
            let account = Identity(name)
            guard !account.isUnmanaged else { continue }   // folded to the unmanaged identity: admitted by design
            await #expect(throws: AdmissionError.self, "\(account.debugDescription)") {
                try await manager.withAdmittedIdentity(account) {}
            }
        }
        // White space only is the unmanaged identity itself.
        #expect(Identity(" \u{0085}\u{00A0}\u{3000} ").isUnmanaged)
    }

    @Test("the completion-handler form refuses before the first load and never runs the operation")
    func completionHandlerFormRefuses() async throws {
        let manager = PolicyManager(policySource: LatePolicySource())
        let ran = LockedValue(false)
        let error: AdmissionError? = await withCheckedContinuation { continuation in
            manager.withAdmittedIdentity(alice, operation: { ran.withLock { $0 = true } }) { error in
                continuation.resume(returning: error)
            }
        }
        #expect(error?.result == .failed)
        #expect(!ran.withLock { $0 })
    }

    @Test("a source swapped in that has not loaded yet refuses again, although the previous one had loaded")
    func swappedInSourceRefuses() async throws {
        let first = LatePolicySource()
        first.load([alice: Policy(identity: nil)])
        let manager = PolicyManager(policySource: first)
        try await manager.withAdmittedIdentity(alice) {}
        manager.policySource = LatePolicySource()
        await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(alice) {} }
        await #expect(throws: AdmissionError.self) { try await manager.withAdmittedIdentity(bob) {} }
    }
}
