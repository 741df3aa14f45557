import Dispatch
import IdentityRuntime
import Synchronization

/// Whether the process services the main dispatch queue (and with it the main actor): a test runner or
/// program that never runs its main loop does not, and work sent there would wait forever.
enum MainQueueProbe {
    /// Seconds a probe block on the main queue may wait before the queue counts as not serviced.
    static let patience = 10
    private static let seenServiced = Atomic<Bool>(false)

    /// Sends a block to the main queue and waits for it, at most ``patience`` seconds. Once it has run, later
    /// calls answer at once.
    static func isServiced() async -> Bool {
        if seenServiced.load(ordering: .relaxed) { return true }
        let answered = LockedValue(false)
        let serviced: Bool = await withCheckedContinuation { continuation in
            DispatchQueue.main.async {
                if answered.withLock({ first(&$0) }) { continuation.resume(returning: true) }
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(patience)) {
                if answered.withLock({ first(&$0) }) { continuation.resume(returning: false) }
            }
        }
        if serviced { seenServiced.store(true, ordering: .relaxed) }
        return serviced
    }

    /// Whether this is the first answer (and marks it given).
    private static func first(_ answered: inout Bool) -> Bool {
        defer { answered = true }
        return !answered
    }
}
