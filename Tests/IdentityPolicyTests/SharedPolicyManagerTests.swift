import Foundation
@testable import IdentityPolicy
import IdentityRuntime
import Testing

/// Whether to run the tests of `PolicyManager.shared`. They write process-wide state (the process identity,
/// every UI identity) that suites of other targets running in parallel read, so they run only on request:
/// `IDENTITY_PROCESS_WIDE_TESTS=1 swift test --filter SharedPolicyManagerTests`.
let processWideTestsEnabled = ProcessInfo.processInfo.environment["IDENTITY_PROCESS_WIDE_TESTS"] == "1"

/// `PolicyManager.shared` writes process-wide state: serialized, reset before and after each test, and opt-in.
@Suite("PolicyManager.shared: bound to IdentityContext", .serialized,
       .enabled(if: processWideTestsEnabled, "set IDENTITY_PROCESS_WIDE_TESTS=1 (writes process-wide identities)"))
struct SharedPolicyManagerTests {
    init() { PolicyManager.shared.resetForTesting() }

    @Test("single-identity mode: the process identity follows the primary user")
    func processIdentityFollows() {
        defer { PolicyManager.shared.resetForTesting() }
        let shared = PolicyManager.shared
        #expect(shared.scope == .processWide)
        shared.setPrimaryUser(alice)
        #expect(IdentityContext.processIdentity == alice)
        #expect(IdentityContext.effectiveFileIdentity == alice)
        shared.setPrimaryUser(nil)
        #expect(IdentityContext.processIdentity == nil)
    }

    @Test("multi-identity mode: the process identity is the app's")
    func multiIdentity() {
        defer { PolicyManager.shared.resetForTesting() }
        var settings = RuntimeSettings()
        settings.multiIdentity = true
        PolicyManager.shared.settings = settings
        PolicyManager.shared.setPrimaryUser(alice)
        #expect(IdentityContext.processIdentity == nil)
    }

    @Test("handshakes set IdentityContext's UI identity; main-queue UI work sees it")
    func uiIdentity() async {
        defer { PolicyManager.shared.resetForTesting() }
        let shared = PolicyManager.shared
        shared.setPrimaryUser(alice)
        #expect(await shared.setUIPolicyIdentity(dave, for: "w") == .success)
        #expect(IdentityContext.uiPolicyIdentity(for: "w") == dave)
        let onMain = await MainActor.run { IdentityContext.effectiveUIIdentity(for: "w") }
        #expect(onMain == dave)
        #expect(IdentityContext.effectiveUIIdentity(for: "w") == alice)   // off the main thread: process identity
        shared.delegate = ClosureDelegate { _, _, _, answer in answer(.success) }
        #expect(await shared.requestIdentitySwitch(to: alice, reason: .openURL) == .success)
        #expect(IdentityContext.uiPolicyIdentity(for: IdentityContext.keyWindow) == alice)
        #expect(await shared.setUIPolicyIdentity(nil, for: "w") == .success)
        #expect(IdentityContext.uiPolicyIdentity(for: "w") == nil)
    }

    @Test("notifications of the shared manager go to NotificationCenter.default")
    func defaultCenter() async {
        defer { PolicyManager.shared.resetForTesting() }
        let names = Recorder<Notification.Name>()
        let token = NotificationCenter.default.addObserver(forName: .primaryUserDidChange, object: PolicyManager.shared, queue: nil) { note in
            names.append(note.name)
        }
        defer { NotificationCenter.default.removeObserver(token) }
        PolicyManager.shared.setPrimaryUser(bob)
        #expect(names.all == [.primaryUserDidChange])
    }
}

@Suite("Events: Notification.Name and AsyncSequence")
struct EventTests {
    @Test("each subscriber gets every event in order; a dropped stream unsubscribes")
    func stream() async {
        let manager = PolicyManager()
        let first = manager.events
        do {
            _ = manager.events   // dropped at once
        }
        let second = manager.events
        manager.setPrimaryUser(alice)
        #expect(await switchUI(manager, dave, window: "w") == .success)
        for stream in [first, second] {
            var iterator = stream.makeAsyncIterator()
            #expect(await iterator.next() == .primaryUserDidChange(alice))
            #expect(await iterator.next() == .policyDidChange)
            #expect(await iterator.next() == .accountPoliciesDidChange(accounts: [alice], tenants: []))
            #expect(await iterator.next() == .accountManaged(alice))
            #expect(await iterator.next() == .uiIdentityDidChange(window: "w", identity: dave))
        }
    }

    @Test("isolated managers post to their own notification center, not the default one")
    func isolatedCenter() {
        let manager = PolicyManager()
        let own = Recorder<Bool>()
        let global = Recorder<Bool>()
        let ownToken = manager.notificationCenter.addObserver(forName: .primaryUserDidChange, object: manager, queue: nil) { _ in own.append(true) }
        let globalToken = NotificationCenter.default.addObserver(forName: .primaryUserDidChange, object: manager, queue: nil) { _ in global.append(true) }
        defer {
            manager.notificationCenter.removeObserver(ownToken)
            NotificationCenter.default.removeObserver(globalToken)
        }
        manager.setPrimaryUser(alice)
        #expect(own.count == 1)
        #expect(global.count == 0)
        #expect(manager.notificationCenter !== NotificationCenter.default)
    }
}
