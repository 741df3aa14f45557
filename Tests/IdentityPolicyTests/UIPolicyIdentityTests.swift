import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("setUIPolicyIdentity: app-initiated switch (article AccountsAndPolicies)")
struct UIPolicyIdentityTests {
    let window: WindowID = "doc-1"

    @Test("nil clears the window's UI identity: success")
    func nilClears() async {
        let manager = makeManager()
        #expect(await switchUI(manager, dave, window: window) == .success)
        #expect(manager.uiPolicyIdentity(for: window) == dave)
        #expect(await switchUI(manager, nil, window: window) == .success)
        #expect(manager.uiPolicyIdentity(for: window) == nil)
    }

    @Test("unmanaged identities switch at once, without running checks", arguments: [Identity.unmanaged, dave, carol])
    func unmanagedAtOnce(identity: Identity) async {
        let log = Recorder<String>()
        let manager = makeManager(checks: [RecordingCheck(name: "pin", outcome: .fails, log: log)])
        #expect(await switchUI(manager, identity, window: window) == .success)
        #expect(manager.uiPolicyIdentity(for: window) == identity)
        #expect(log.all.isEmpty)
    }

    @Test("the managed identity runs every check in order, with its own thread identity; all pass: success")
    func checksInOrder() async {
        let log = Recorder<String>()
        let manager = makeManager(checks: [
            RecordingCheck(name: "pin", outcome: .passes, log: log),
            RecordingCheck(name: "auth", outcome: .passes, log: log),
            RecordingCheck(name: "compliance", outcome: .passes, log: log),
        ])
        #expect(await switchUI(manager, "ALICE@contoso.com", window: window) == .success)
        #expect(manager.uiPolicyIdentity(for: window) == alice)
        #expect(log.all.map { $0.split(separator: ":").first.map(String.init) } == ["pin", "auth", "compliance"])
        #expect(log.all.allSatisfy { $0.hasSuffix(":doc-1:ALICE@contoso.com") || $0.hasSuffix(":doc-1:alice@contoso.com") })
    }

    @Test("a check that cancels or fails ends the switch; later checks do not run; identity unchanged", arguments: [
        (ConditionalLaunchOutcome.cancels, SwitchIdentityResult.canceled), (.fails, .failed),
    ])
    func checkStops(outcome: ConditionalLaunchOutcome, expected: SwitchIdentityResult) async {
        let log = Recorder<String>()
        let manager = makeManager(checks: [
            RecordingCheck(name: "pin", outcome: .passes, log: log),
            RecordingCheck(name: "auth", outcome: outcome, log: log),
            RecordingCheck(name: "never", outcome: .passes, log: log),
        ])
        #expect(await switchUI(manager, dave, window: window) == .success)
        #expect(await switchUI(manager, alice, window: window) == expected)
        #expect(manager.uiPolicyIdentity(for: window) == dave)
        #expect(log.count == 2)
    }

    @Test("async twin: same rules")
    func asyncTwin() async {
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in .cancels }])
        #expect(await manager.setUIPolicyIdentity(dave, for: window) == .success)
        #expect(await manager.setUIPolicyIdentity(alice, for: window) == .canceled)
        #expect(await manager.setUIPolicyIdentity(nil, for: window) == .success)
        #expect(manager.uiPolicyIdentity(for: window) == nil)
    }

    @Test("an unannotated awaited call picks the async twin and returns its result")
    func unannotatedAwaitPicksTheAsyncTwin() async {
        let manager = makeManager()
        let result = await manager.setUIPolicyIdentity(dave, for: .main)
        let typed: SwitchIdentityResult = result
        #expect(typed == .success)
        #expect(manager.uiPolicyIdentity(for: .main) == dave)
        let cleared = await manager.setUIPolicyIdentity(nil)
        #expect(cleared == .success)
    }

    @Test("one managed account (maxManagedAccounts = 1): a managed identity other than the primary user is not allowed")
    func secondManagedIdentity() async {
        let source = StaticPolicySource([bob: Policy(identity: nil)])
        let manager = makeManager(settings: .singleManagedAccount, policySource: source)
        #expect(await switchUI(manager, dave, window: window) == .success)
        #expect(await switchUI(manager, bob, window: window) == .notAllowed)
        #expect(manager.uiPolicyIdentity(for: window) == dave)
        #expect(manager.isIdentityManaged(alice))
        #expect(!manager.isIdentityManaged(bob))
    }

    @Test("main thread with a conflicting thread identity: not allowed; same identity or nil request: allowed")
    @MainActor
    func mainThreadConflict() async {
        let manager = makeManager()
        #expect(IdentityContext.isOnMainThread)
        await IdentityContext.withThreadIdentity(dave) {
            #expect(await manager.setUIPolicyIdentity(alice, for: window) == .notAllowed)
            #expect(await manager.setUIPolicyIdentity(carol, for: window) == .notAllowed)
            #expect(await manager.setUIPolicyIdentity(dave, for: window) == .success)
            #expect(await manager.setUIPolicyIdentity(nil, for: window) == .success)
        }
        let viaHandler = await withCheckedContinuation { continuation in
            IdentityContext.withThreadIdentity(bob) {
                manager.setUIPolicyIdentity(alice, for: window) { continuation.resume(returning: $0) }
            }
        }
        #expect(viaHandler == .notAllowed)
        #expect(manager.uiPolicyIdentity(for: window) == nil)
    }

    @Test("off the main thread a thread identity does not block the switch")
    func offMainThread() async {
        let manager = makeManager()
        let result = await Task.detached {
            await IdentityContext.withThreadIdentity(dave) {
                #expect(!IdentityContext.isOnMainThread)
                return await manager.setUIPolicyIdentity(alice, for: "w")
            }
        }.value
        #expect(result == .success)
    }

    @Test("a newer call supersedes a slow check: the older completes canceled, its check task is cancelled")
    func supersede() async {
        let gate = Gate()
        let sawCancellation = Recorder<Bool>()
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await gate.wait()
            sawCancellation.append(Task.isCancelled)
            return .passes
        }])
        let first = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: window) { first.append($0) }
        #expect(await eventually { gate.entered == 1 })
        #expect(await switchUI(manager, dave, window: window) == .success)
        #expect(await eventually { first.count == 1 })
        #expect(first.all == [.canceled])
        gate.open()
        #expect(await eventually { sawCancellation.count == 1 })
        #expect(sawCancellation.all == [true])
        try? await Task.sleep(for: .milliseconds(20))
        #expect(first.all == [.canceled])
        #expect(manager.uiPolicyIdentity(for: window) == dave)
    }

    @Test("a newer managed call supersedes an older one; only the newest succeeds")
    func supersedeManaged() async {
        let gate = Gate()
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await gate.wait()
            return .passes
        }])
        let results = (0..<5).map { _ in Recorder<SwitchIdentityResult>() }
        for (index, recorder) in results.enumerated() {
            manager.setUIPolicyIdentity(alice, for: window) { recorder.append($0) }
            #expect(await eventually { gate.entered == index + 1 })
        }
        gate.open()
        #expect(await eventually { results.allSatisfy { $0.count == 1 } })
        #expect(results.map { $0.all } == [[.canceled], [.canceled], [.canceled], [.canceled], [.success]])
        #expect(manager.uiPolicyIdentity(for: window) == alice)
    }

    @Test("windows are independent: a call for one window supersedes nothing in another")
    func windowsIndependent() async {
        let gate = Gate()
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await gate.wait()
            return .passes
        }])
        let first = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: "a") { first.append($0) }
        #expect(await eventually { gate.entered == 1 })
        #expect(await switchUI(manager, dave, window: "b") == .success)
        gate.open()
        #expect(await eventually { first.count == 1 })
        #expect(first.all == [.success])
        #expect(manager.uiPolicyIdentity(for: "a") == alice)
        #expect(manager.uiPolicyIdentity(for: "b") == dave)
    }

    @Test("nil window means the key window")
    func keyWindow() async {
        let manager = makeManager()
        manager.keyWindow = "scene-2"
        #expect(await switchUI(manager, dave) == .success)
        #expect(manager.uiPolicyIdentity(for: "scene-2") == dave)
        #expect(manager.uiPolicyIdentity() == dave)
        #expect(manager.uiPolicyIdentity(for: .main) == nil)
    }

    @Test("the completion runs on the chosen queue; the default is not the main queue")
    func completionQueue() async {
        let manager = makeManager()
        let queue = DispatchQueue(label: "completion")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let onQueue = await withCheckedContinuation { continuation in
            manager.setUIPolicyIdentity(dave, for: window, completionQueue: queue) { _ in
                continuation.resume(returning: DispatchQueue.getSpecific(key: key))
            }
        }
        #expect(onQueue == 7)
        let onMain = await withCheckedContinuation { continuation in
            manager.setUIPolicyIdentity(alice, for: window) { _ in
                continuation.resume(returning: IdentityContext.isOnMainThread)
            }
        }
        #expect(!onMain)
    }

    @Test("a handler is never called inline, and every outcome completes exactly once", arguments: [
        Identity?.none, .some(.unmanaged), .some(dave), .some(alice), .some(bob),
    ])
    func neverInline(identity: Identity?) async {
        let manager = makeManager(policySource: StaticPolicySource([bob: Policy(identity: nil)]))
        let calls = Recorder<SwitchIdentityResult>()
        let inline = LockedValue(false)
        // A handler called inline runs inside this task-local scope; one delivered on a queue does not.
        // (A flag set after the call returns would race with a fast delivery on another thread.)
        InlineMarker.$insideCall.withValue(true) {
            manager.setUIPolicyIdentity(identity, for: window) { result in
                if InlineMarker.insideCall { inline.withLock { $0 = true } }
                calls.append(result)
            }
        }
        #expect(await eventually { calls.count == 1 })
        try? await Task.sleep(for: .milliseconds(10))
        #expect(calls.count == 1)
        #expect(!inline.withLock { $0 })
    }
}

@Suite("setUIPolicyIdentity under contention")
struct UIPolicyIdentityRaceTests {
    static let calls = ProcessInfo.processInfo.environment["IDENTITY_LONG_TESTS"] == "1" ? 100_000 : 10_000

    @Test("10,000 concurrent unmanaged calls on one window: each completes exactly once; the last applied wins")
    func concurrentUnmanaged() async {
        let manager = makeManager()
        let window: WindowID = "race"
        let counts = LockedValue([Int](repeating: 0, count: Self.calls))
        let done = Recorder<Int>()
        DispatchQueue.concurrentPerform(iterations: Self.calls) { index in
            manager.setUIPolicyIdentity(Identity("user\(index)@gmail.com"), for: window) { result in
                #expect(result == .success)
                counts.withLock { $0[index] += 1 }
                done.append(index)
            }
        }
        #expect(await eventually { done.count == Self.calls })
        try? await Task.sleep(for: .milliseconds(20))
        #expect(counts.withLock { $0.allSatisfy { $0 == 1 } })
        // Changes are applied in lock order, so the window holds one of the requested identities.
        let final = manager.uiPolicyIdentity(for: window)
        #expect(final.map { $0.name.hasPrefix("user") && $0.name.hasSuffix("@gmail.com") } == true)
        // A call made after all of them wins.
        #expect(await switchUI(manager, dave, window: window) == .success)
        #expect(manager.uiPolicyIdentity(for: window) == dave)
    }

    @Test("10,000 concurrent calls mixing managed (slow check) and unmanaged: exactly once each; final state is the last accepted call")
    func concurrentMixed() async {
        let manager = makeManager(checks: [ClosureConditionalLaunchCheck { _, _ in
            await Task.yield()
            return .passes
        }])
        let window: WindowID = "mixed"
        let counts = LockedValue([Int](repeating: 0, count: Self.calls))
        let results = LockedValue([SwitchIdentityResult?](repeating: nil, count: Self.calls))
        let done = Recorder<Int>()
        DispatchQueue.concurrentPerform(iterations: Self.calls) { index in
            let identity: Identity = index.isMultiple(of: 2) ? alice : Identity("user\(index)@gmail.com")
            manager.setUIPolicyIdentity(identity, for: window) { result in
                counts.withLock { $0[index] += 1 }
                results.withLock { $0[index] = result }
                done.append(index)
            }
        }
        #expect(await eventually { done.count == Self.calls })
        try? await Task.sleep(for: .milliseconds(20))
        #expect(counts.withLock { $0.allSatisfy { $0 == 1 } })
        let all = results.withLock { $0.compactMap { $0 } }
        #expect(all.allSatisfy { $0 == .success || $0 == .canceled })
        // Unmanaged calls always succeed; managed calls succeed only if nothing superseded them.
        #expect(results.withLock { values in values.indices.filter { !$0.isMultiple(of: 2) }.allSatisfy { values[$0] == .success } })
        #expect(manager.uiPolicyIdentity(for: window) != nil)
        // Deterministic "last wins": a final sequence from one thread.
        let gate = Gate()
        manager.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { _, _ in await gate.wait(); return .passes }]
        let older = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: window) { older.append($0) }
        #expect(await switchUI(manager, carol, window: window) == .success)
        gate.open()
        #expect(await eventually { older.count == 1 })
        #expect(older.all == [.canceled])
        #expect(manager.uiPolicyIdentity(for: window) == carol)
    }
}

/// Marks code running inside a `setUIPolicyIdentity` call, to tell inline handlers from queued ones.
enum InlineMarker {
    @TaskLocal static var insideCall = false
}
