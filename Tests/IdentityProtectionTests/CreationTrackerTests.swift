import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

/// The wait of a removal for the creations in flight (`CreationTracker`): it blocks on a condition, wakes
/// when the last creation it waits for ends, and gives up at its timeout when one never ends.
@Suite("CreationTracker: a removal waits for the creations in flight")
struct CreationTrackerTests {
    /// Runs `waitUntilIdle` on a thread of its own; `finished` is signalled when it returns.
    private final class Waiter: Sendable {
        let finished = DispatchSemaphore(value: 0)
        /// What `waitUntilIdle` returned and how long it took, once it has returned.
        let outcome = LockedValue<(idle: Bool, seconds: Double)?>(nil)

        init(_ tracker: CreationTracker, owners: Set<Identity>, timeout: Duration?) {
            Thread.detachNewThread { [self] in
                let start = ContinuousClock.now
                let idle = tracker.waitUntilIdle(owners, timeout: timeout)
                let elapsed = ContinuousClock.now - start
                outcome.withLock {
                    $0 = (idle, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                }
                finished.signal()
            }
        }

        /// Whether it returned within `seconds`.
        func returns(within seconds: Double) -> Bool {
            finished.wait(timeout: .now() + seconds) == .success
        }
    }

    @Test("a waiter sleeps while creations are in flight and wakes when the last one ends, long before its timeout")
    func wakesAtTheLastEnd() {
        let tracker = CreationTracker()
        let alice: Identity = "alice@contoso.com"
        let first = tracker.begin(alice)
        let second = tracker.begin(alice)
        let waiter = Waiter(tracker, owners: [alice], timeout: .seconds(120))
        #expect(!waiter.returns(within: 0.2), "returned with two creations in flight")
        tracker.end(alice, ticket: first)
        #expect(!waiter.returns(within: 0.2), "returned with one creation still in flight")
        tracker.end(alice, ticket: second)
        #expect(waiter.returns(within: 60), "did not wake when the last creation ended")
        let outcome = waiter.outcome.withLock { $0 }
        #expect(outcome?.idle == true)
        #expect((outcome?.seconds ?? .infinity) < 120, "woke by its timeout, not by the end of the creation")
    }

    @Test("a waiter without a timeout wakes when the last creation ends")
    func wakesWithoutTimeout() {
        let tracker = CreationTracker()
        let alice: Identity = "alice@contoso.com"
        let ticket = tracker.begin(alice)
        let waiter = Waiter(tracker, owners: [alice], timeout: nil)
        #expect(!waiter.returns(within: 0.2), "returned with a creation in flight")
        tracker.end(alice, ticket: ticket)
        #expect(waiter.returns(within: 60), "did not wake when the creation ended")
        #expect(waiter.outcome.withLock { $0 }?.idle == true)
    }

    @Test("a creation that never ends: the wait gives up at its timeout and says so")
    func timesOut() {
        let tracker = CreationTracker()
        let alice: Identity = "alice@contoso.com"
        _ = tracker.begin(alice)
        let start = ContinuousClock.now
        #expect(!tracker.waitUntilIdle([alice], timeout: .milliseconds(150)))
        #expect(ContinuousClock.now - start >= .milliseconds(150))
    }

    @Test("creations of other owners, and none at all, do not hold a waiter")
    func otherOwnersDoNotHold() {
        let tracker = CreationTracker()
        let alice: Identity = "alice@contoso.com"
        let bob: Identity = "bob@contoso.com"
        let bobs = tracker.begin(bob)
        #expect(tracker.waitUntilIdle([alice], timeout: .seconds(30)))
        #expect(tracker.waitUntilIdle([], timeout: .seconds(30)))
        let alices = tracker.begin(alice)
        tracker.end(alice, ticket: alices)
        #expect(tracker.waitUntilIdle([alice], timeout: .seconds(30)))
        #expect(!tracker.waitUntilIdle([alice, bob], timeout: .milliseconds(50)))
        tracker.end(bob, ticket: bobs)
        #expect(tracker.waitUntilIdle([alice, bob], timeout: .seconds(30)))
    }
}
