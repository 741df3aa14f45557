import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("requestIdentitySwitch: runtime-initiated switch (article AccountsAndPolicies)")
struct RequestIdentitySwitchTests {
    func manager(timeout: TimeInterval = 600, delegate: ClosureDelegate?) -> PolicyManager {
        var settings = RuntimeSettings()
        settings.delegateTimeout = timeout
        let manager = makeManager(settings: settings)
        manager.delegate = delegate
        return manager
    }

    @Test("no delegate: failed, nothing changes")
    func noDelegate() async {
        let manager = manager(delegate: nil)
        #expect(await manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") == .failed)
        #expect(manager.uiPolicyIdentity(for: "w") == nil)
    }

    @Test("the delegate gets identity, reason and window; success sets the UI identity", arguments: IdentitySwitchReason.allCases)
    func success(reason: IdentitySwitchReason) async {
        let asked = Recorder<String>()
        let manager = manager(delegate: ClosureDelegate { identity, reason, window, answer in
            asked.append("\(identity.name)|\(reason.rawValue)|\(window.rawValue)")
            answer(.success)
        })
        #expect(await manager.requestIdentitySwitch(to: alice, reason: reason, window: "w") == .success)
        #expect(asked.all == ["alice@contoso.com|\(reason.rawValue)|w"])
        #expect(manager.uiPolicyIdentity(for: "w") == alice)
    }

    @Test("the delegate's refusal is returned and leaves the UI identity alone", arguments: [
        SwitchIdentityResult.canceled, .failed, .notAllowed,
    ])
    func refusal(answer: SwitchIdentityResult) async {
        let manager = manager(delegate: ClosureDelegate { _, _, _, handler in handler(answer) })
        #expect(await switchUI(manager, dave, window: "w") == .success)
        #expect(await manager.requestIdentitySwitch(to: alice, reason: .documentImport, window: "w") == answer)
        #expect(manager.uiPolicyIdentity(for: "w") == dave)
    }

    @Test("\"\" asks for an unmanaged account and sets the unmanaged identity")
    func unmanaged() async {
        let asked = Recorder<Identity>()
        let manager = manager(delegate: ClosureDelegate { identity, _, _, answer in
            asked.append(identity)
            answer(.success)
        })
        #expect(await manager.requestIdentitySwitch(to: "", reason: .openURL) == .success)
        #expect(asked.all == [.unmanaged])
        #expect(manager.uiPolicyIdentity() == .unmanaged)
    }

    @Test("the requester suspends until the delegate answers later from another thread")
    func answerFromAnotherThread() async {
        let handler = LockedValue<(@Sendable (SwitchIdentityResult) -> Void)?>(nil)
        let manager = manager(delegate: ClosureDelegate { _, _, _, answer in handler.withLock { $0 = answer } })
        let done = Recorder<SwitchIdentityResult>()
        let request = Task { await manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") }
        #expect(await eventually { handler.withLock { $0 } != nil })
        try? await Task.sleep(for: .milliseconds(20))
        #expect(done.count == 0)
        let thread = Thread { handler.withLock { $0 }?(.success) }
        thread.start()
        let result = await request.value
        done.append(result)
        #expect(result == .success)
        #expect(manager.uiPolicyIdentity(for: "w") == alice)
    }

    @Test("a delegate that answers twice: the first answer counts, the second is ignored and reported")
    func answersTwice() async {
        let marker = "twice-\(UUID().uuidString)@contoso.com"
        let identity = Identity(marker)
        let manager = manager(delegate: ClosureDelegate { _, _, _, answer in
            answer(.canceled)
            answer(.success)
            DispatchQueue.global().async { answer(.failed) }
        })
        var result: SwitchIdentityResult?
        let issues = await collectIssues(marker: marker) { collected in
            result = await manager.requestIdentitySwitch(to: identity, reason: .openURL, window: "w")
            _ = await eventually { collected.count >= 2 }
        }
        #expect(result == .canceled)
        #expect(manager.uiPolicyIdentity(for: "w") == nil)
        #expect(issues.count == 2)
    }

    @Test("a delegate that never answers: failed after the timeout")
    func neverAnswers() async {
        let manager = manager(timeout: 0.1, delegate: ClosureDelegate { _, _, _, _ in })
        let start = Date()
        #expect(await manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") == .failed)
        #expect(Date().timeIntervalSince(start) >= 0.09)
        #expect(manager.uiPolicyIdentity(for: "w") == nil)
    }

    @Test("an answer after the timeout is ignored")
    func lateAnswer() async {
        let handler = LockedValue<(@Sendable (SwitchIdentityResult) -> Void)?>(nil)
        let manager = manager(timeout: 0.05, delegate: ClosureDelegate { _, _, _, answer in handler.withLock { $0 = answer } })
        #expect(await manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") == .failed)
        handler.withLock { $0 }?(.success)
        try? await Task.sleep(for: .milliseconds(20))
        #expect(manager.uiPolicyIdentity(for: "w") == nil)
    }

    @Test("cancelling the requesting task completes it canceled")
    func cancelled() async {
        let manager = manager(delegate: ClosureDelegate { _, _, _, _ in })
        let request = Task { await manager.requestIdentitySwitch(to: alice, reason: .openURL, window: "w") }
        try? await Task.sleep(for: .milliseconds(10))
        request.cancel()
        #expect(await request.value == .canceled)
    }

    @Test("a delegate success supersedes an app-initiated switch still running its checks")
    func supersedesAppSwitch() async {
        let gate = Gate()
        let manager = manager(delegate: ClosureDelegate { _, _, _, answer in answer(.success) })
        manager.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { _, _ in await gate.wait(); return .passes }]
        let older = Recorder<SwitchIdentityResult>()
        manager.setUIPolicyIdentity(alice, for: "w") { older.append($0) }
        #expect(await eventually { gate.entered == 1 })
        #expect(await manager.requestIdentitySwitch(to: dave, reason: .openURL, window: "w") == .success)
        #expect(await eventually { older.count == 1 })
        #expect(older.all == [.canceled])
        gate.open()
        try? await Task.sleep(for: .milliseconds(10))
        #expect(manager.uiPolicyIdentity(for: "w") == dave)
    }

    @Test("1,000 concurrent requests answered on random threads each resume exactly once")
    func concurrentRequests() async {
        let manager = manager(delegate: ClosureDelegate { _, _, _, answer in
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(Int.random(in: 0...500))) { answer(.success) }
        })
        let results = await withTaskGroup(of: SwitchIdentityResult.self) { group in
            for index in 0..<1000 {
                group.addTask { await manager.requestIdentitySwitch(to: Identity("u\(index)@gmail.com"), reason: .openURL, window: WindowID("w\(index % 7)")) }
            }
            return await group.reduce(into: [SwitchIdentityResult]()) { $0.append($1) }
        }
        #expect(results.count == 1000)
        #expect(results.allSatisfy { $0 == .success })
    }
}

@Suite("addIdentity and restartApplication")
struct AddIdentityTests {
    @Test("the delegate adds the account: success; refuses: failed; no delegate: failed")
    func addIdentity() async {
        let manager = makeManager()
        #expect(await manager.addIdentity(bob) == .failed)
        let added = Recorder<Identity>()
        manager.delegate = ClosureDelegate(onAdd: { identity, answer in
            added.append(identity)
            DispatchQueue.global().async { answer(identity == bob ? .success : .failed) }
        })
        #expect(await manager.addIdentity(bob) == .success)
        #expect(await manager.addIdentity(carol) == .failed)
        #expect(added.all == [bob, carol])
        #expect(await manager.addIdentity(.unmanaged) == .failed)
    }

    @Test("completion-handler form completes once; a silent delegate times out as failed")
    func addIdentityHandler() async {
        var settings = RuntimeSettings()
        settings.delegateTimeout = 0.05
        let manager = makeManager(settings: settings)
        manager.delegate = ClosureDelegate(onAdd: { _, _ in })
        let result = await withCheckedContinuation { continuation in
            manager.addIdentity(bob) { continuation.resume(returning: $0) }
        }
        #expect(result == .failed)
    }

    @Test("restartApplication: the delegate handles it, or restartRequired is posted")
    func restart() async {
        let manager = makeManager()
        let events = manager.events
        let observed = Recorder<Notification.Name>()
        let token = manager.notificationCenter.addObserver(forName: .restartRequired, object: manager, queue: nil) { note in
            observed.append(note.name)
        }
        defer { manager.notificationCenter.removeObserver(token) }
        manager.delegate = ClosureDelegate(onRestart: { true })
        #expect(manager.restartApplication())
        #expect(observed.count == 0)
        manager.delegate = ClosureDelegate(onRestart: { false })
        #expect(!manager.restartApplication())
        #expect(observed.count == 1)
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .restartRequired)
    }
}
