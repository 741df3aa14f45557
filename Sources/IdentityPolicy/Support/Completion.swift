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
