import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// An identity switch waits on checks or on the delegate. An account blocked or disallowed while it waits is
/// not shown when the wait ends: the switch completes `.notAllowed`, as it would have at the start. (A wipe of
/// the account supersedes an app-initiated switch to it, which completes `.canceled`; a runtime-initiated
/// one the delegate accepts after the wipe is refused here.)
@Suite("An identity switch decided again when its checks or the delegate answer")
struct SwitchAfterChecksTests {
    /// A manager whose conditional-launch check for alice waits for `gate`.
    private func gatedManager(_ gate: Gate, settings: RuntimeSettings = RuntimeSettings()) -> PolicyManager {
        makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await gate.wait()
            return .passes
        }], settings: settings)
    }

    @Test("an account blocked while its conditional-launch checks run is not shown: notAllowed, nothing set")
    func blockedWhileChecksRun() async {
        let gate = Gate()
        let manager = gatedManager(gate)
        async let result = switchUI(manager, alice, window: "w")
        #expect(await eventually { gate.entered == 1 })
        manager.blockAccount(alice, reason: .clockedOut)
        gate.open()
        #expect(await result == .notAllowed)
        #expect(manager.uiPolicyIdentity(for: "w") == nil)
        // The refusal is the block's; the passing checks block nothing more.
        #expect(manager.blockReason(for: alice) == .clockedOut)
        manager.unblockAccount(alice, reason: .clockedOut)
        #expect(await switchUI(manager, alice, window: "w") == .success)
        #expect(manager.uiPolicyIdentity(for: "w") == alice)
    }

    @Test("an account an administrator blocks while its checks run is not shown by the async twin")
    func blockedByAdministratorWhileChecksRun() async {
        let gate = Gate()
        let manager = gatedManager(gate)
        async let result = manager.setUIPolicyIdentity(alice, for: "w")
        #expect(await eventually { gate.entered == 1 })
        manager.blockAccount(alice, reason: .blockedByAdministrator)
        gate.open()
        #expect(await result == .notAllowed)
        #expect(manager.uiPolicyIdentities(for: "w").isEmpty)
    }

    @Test("a window of several accounts is not set when one of them is dropped from the allowed accounts meanwhile")
    func disallowedWhileChecksRun() async {
        let gate = Gate()
        var settings = RuntimeSettings()
        settings.allowedAccounts = [alice, dave]
        let manager = gatedManager(gate, settings: settings)
        let answer = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentities([alice, dave], for: "w") { answer.append($0) }
        #expect(await eventually { gate.entered == 1 })
        manager.allowedAccounts = [alice]
        gate.open()
        #expect(await eventually { answer.count == 1 })
        #expect(answer.all == [.notAllowed])
        #expect(manager.uiPolicyIdentities(for: "w").isEmpty)
    }

    @Test("a runtime-initiated switch the delegate accepts after the account was blocked sets nothing: notAllowed")
    func delegateAcceptsAfterBlock() async {
        let handler = LockedValue<(@Sendable (SwitchIdentityResult) -> Void)?>(nil)
        let manager = makeManager()
        manager.delegate = ClosureDelegate { _, _, _, answer in handler.withLock { $0 = answer } }
        #expect(await switchUI(manager, dave, window: "w") == .success)
        let request = Task { await manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") }
        #expect(await eventually { handler.withLock { $0 } != nil })
        _ = await manager.wipeData(forAccount: alice)
        handler.withLock { $0 }?(.success)
        #expect(await request.value == .notAllowed)
        #expect(manager.uiPolicyIdentity(for: "w") == dave)
    }
}
