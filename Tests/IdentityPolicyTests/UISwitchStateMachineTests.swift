@testable import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("UISwitchStateMachine: actions, no locks")
struct UISwitchStateMachineTests {
    let completion = Completion<SwitchIdentityResult>(queue: nil) { _ in }

    @Test("unmanaged and nil apply at once; managed goes in flight")
    func start() {
        var machine = UISwitchStateMachine()
        guard case .applied(nil) = machine.start(window: "w", identity: dave, managed: false, completion: completion, attempt: SwitchAttempt()) else {
            Issue.record("expected applied")
            return
        }
        #expect(machine.identity(for: "w") == dave)
        guard case let .runChecks(token, nil) = machine.start(window: "w", identity: alice, managed: true, completion: completion, attempt: SwitchAttempt()) else {
            Issue.record("expected runChecks")
            return
        }
        #expect(machine.identity(for: "w") == dave)
        guard case .complete(_, .success, applied: true) = machine.finish(window: "w", token: token, outcome: .passes) else {
            Issue.record("expected success")
            return
        }
        #expect(machine.identity(for: "w") == alice)
        guard case .applied(nil) = machine.start(window: "w", identity: nil, managed: false, completion: completion, attempt: SwitchAttempt()) else {
            Issue.record("expected applied")
            return
        }
        #expect(machine.identity(for: "w") == nil)
    }

    @Test("a newer start supersedes; the older token finishes with no action", arguments: [true, false])
    func supersede(newerManaged: Bool) {
        var machine = UISwitchStateMachine()
        guard case let .runChecks(old, nil) = machine.start(window: "w", identity: alice, managed: true, completion: completion, attempt: SwitchAttempt()) else {
            Issue.record("expected runChecks")
            return
        }
        let action = machine.start(window: "w", identity: newerManaged ? alice : dave, managed: newerManaged, completion: completion, attempt: SwitchAttempt())
        switch action {
        case let .runChecks(_, superseded?), let .applied(superseded?):
            #expect(superseded.token == old)
        default:
            Issue.record("expected a superseded switch")
        }
        guard case .none = machine.finish(window: "w", token: old, outcome: .passes) else {
            Issue.record("a superseded switch must not complete again")
            return
        }
    }

    @Test("cancel and fail leave the identity unchanged", arguments: [
        (ConditionalLaunchOutcome.cancels, SwitchIdentityResult.canceled), (.fails, .failed),
    ])
    func refused(outcome: ConditionalLaunchOutcome, result: SwitchIdentityResult) {
        var machine = UISwitchStateMachine()
        _ = machine.start(window: "w", identity: dave, managed: false, completion: completion, attempt: SwitchAttempt())
        guard case let .runChecks(token, _) = machine.start(window: "w", identity: alice, managed: true, completion: completion, attempt: SwitchAttempt()) else {
            Issue.record("expected runChecks")
            return
        }
        guard case .complete(_, result, applied: false) = machine.finish(window: "w", token: token, outcome: outcome) else {
            Issue.record("expected \(result)")
            return
        }
        #expect(machine.identity(for: "w") == dave)
    }

    @Test("force and clear supersede in-flight switches")
    func forceAndClear() {
        var machine = UISwitchStateMachine()
        _ = machine.start(window: "a", identity: alice, managed: true, completion: completion, attempt: SwitchAttempt())
        #expect(machine.force(window: "a", identity: dave) != nil)
        #expect(machine.identity(for: "a") == dave)
        _ = machine.start(window: "b", identity: alice, managed: false, completion: completion, attempt: SwitchAttempt())
        _ = machine.start(window: "c", identity: alice, managed: true, completion: completion, attempt: SwitchAttempt())
        let cleared = machine.clear(identity: alice)
        #expect(cleared.windows == ["b"])
        #expect(cleared.superseded.count == 1)
        #expect(machine.identity(for: "a") == dave && machine.identity(for: "b") == nil)
    }
}
