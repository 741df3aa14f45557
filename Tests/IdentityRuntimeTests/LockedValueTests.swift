import Dispatch
@testable import IdentityRuntime
import Testing

@Suite("LockedValue: the package's one lock")
struct LockedValueTests {
    /// Under ThreadSanitizer, a lock over an empty value (one that guards a file, say) was reported as racing
    /// with itself: the empty stored property sits at offset 0, so each access looked like a write to the
    /// object's header. Contended here from four GCD threads; the ThreadSanitizer suite fails on any report.
    @Test("a lock over an empty value serializes its callers and is clean under ThreadSanitizer")
    func emptyValueUnderContention() async {
        let lock = LockedValue(())
        let counter = LockedValue(0)
        let inside = LockedValue(0)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for _ in 0..<4 {
                DispatchQueue.global().async(group: group) {
                    for _ in 0..<2_000 {
                        lock.withLock { (_: inout Void) in
                            let now = inside.withLock { value -> Int in value += 1; return value }
                            counter.withLock { $0 = max($0, now) }
                            inside.withLock { $0 -= 1 }
                        }
                    }
                }
            }
            group.notify(queue: .global()) { continuation.resume() }
        }
        // Never two callers inside at once.
        #expect(counter.withLock { $0 } == 1)
    }

    @Test("a thrown error leaves the lock released")
    func throwingReleases() {
        struct Refused: Error {}
        let value = LockedValue(1)
        #expect(throws: Refused.self) { try value.withLock { (_: inout Int) throws(Refused) in throw Refused() } }
        #expect(value.withLock { $0 } == 1)
    }
}
