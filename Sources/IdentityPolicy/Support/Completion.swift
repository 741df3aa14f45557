import Dispatch

/// A completion handler and the queue it runs on (`nil`: called directly on the thread that completes).
struct Completion<Result: Sendable>: Sendable {
    let queue: DispatchQueue?
    let handler: @Sendable (Result) -> Void

    /// Runs the handler. Never call it while holding a lock.
    func deliver(_ result: Result) {
        if let queue {
            queue.async { handler(result) }
        } else {
            handler(result)
        }
    }
}

/// A switch's completion handler as the caller gave it. Delivering from here needs no reabstraction: a
/// generic ``Completion`` stores its handler at the most general abstraction, so making one from a concrete
/// `(SwitchIdentityResult) -> Void` allocates a thunk, which a switch completed at once (most of them)
/// never needs. ``stored`` makes that ``Completion`` for a switch put in flight.
struct SwitchCompletion: Sendable {
    let queue: DispatchQueue?
    let handler: @Sendable (SwitchIdentityResult) -> Void

    /// Runs the handler: dispatched asynchronously to ``queue``, or directly without one. Never call it while
    /// holding a lock.
    func deliver(_ result: SwitchIdentityResult) {
        if let queue {
            queue.async { handler(result) }
        } else {
            handler(result)
        }
    }

    /// The same handler and queue, to keep with a switch in flight.
    var stored: Completion<SwitchIdentityResult> {
        Completion(queue: queue, handler: handler)
    }
}
