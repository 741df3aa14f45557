import Dispatch
import Foundation
@testable import IdentityRuntime
import Testing

@Suite("LockedCondition: the package's one condition variable")
struct LockedConditionTests {
    @Test("a waiter wakes when another thread makes its condition true, and sees that value")
    func wakesOnChange() async {
        let slot = LockedCondition<Int?>(nil)
        let seen = await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
            Thread.detachNewThread {
                continuation.resume(returning: slot.withLock(waitingUntil: { $0 != nil }) { $0 })
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                slot.withLockWakingWaiters { $0 = 7 }
            }
        }
        #expect(seen == 7)
    }

    @Test("a timed wait whose condition never holds returns after its timeout, and the body still runs")
    func timesOut() {
        let slot = LockedCondition<Int?>(nil)
        let start = ContinuousClock.now
        let seen = slot.withLock(waitingUntil: { $0 != nil }, timeout: .milliseconds(50)) { $0 }
        #expect(seen == nil)
        #expect(ContinuousClock.now - start >= .milliseconds(45))
    }

    @Test("a condition that already holds does not wait")
    func noWaitWhenReady() {
        let slot = LockedCondition(3)
        #expect(slot.withLock(waitingUntil: { $0 == 3 }, timeout: .seconds(60)) { value -> Int in value += 1; return value } == 4)
    }

    @Test("a timeout too long for the wall clock waits without a deadline; a ready value never reads the clock")
    func hugeTimeout() async {
        let ready = LockedCondition(1)
        #expect(ready.withLock(waitingUntil: { $0 == 1 }, timeout: .seconds(Int64.max)) { $0 } == 1)
        let slot = LockedCondition<Int?>(nil)
        let seen = await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
            Thread.detachNewThread {
                continuation.resume(returning: slot.withLock(waitingUntil: { $0 != nil }, timeout: .seconds(Int64.max)) { $0 })
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                slot.withLockWakingWaiters { $0 = 9 }
            }
        }
        #expect(seen == 9)
    }

    @Test("many waiters are all woken by one change; none is left blocked", arguments: [1, 2, 4, 8, 16])
    func everyWaiterWakes(waiters: Int) async {
        let gate = LockedCondition(false)
        let woken = LockedValue(0)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Threads of their own: blocked GCD workers would make libdispatch slow to start more.
            for _ in 0..<waiters {
                Thread.detachNewThread {
                    gate.withLock(waitingUntil: { $0 }) { _ in }
                    if woken.withLock({ value -> Int in value += 1; return value }) == waiters { continuation.resume() }
                }
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                gate.withLockWakingWaiters { $0 = true }
            }
        }
        #expect(woken.withLock { $0 } == waiters)
    }
}
