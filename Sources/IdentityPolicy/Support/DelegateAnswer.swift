import Dispatch
import Foundation
import IdentityRuntime

/// Waits for a delegate's completion handler: the first of the answer, the timeout and task cancellation wins,
/// exactly once. Answers after the first are ignored; a second answer *from the delegate* is reported as a
/// runtime issue (``RuntimeIssue/completionCalledMoreThanOnce(operation:)``).
final class DelegateAnswer<Result: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result, Never>?
        /// The result, once decided (by the delegate, the timeout or cancellation).
        var decided: Result?
        var delegateAnswers = 0
    }

    private let state = LockedValue(State())
    private let operation: String

    private init(operation: String) {
        self.operation = operation
    }

    /// Calls `ask` with a completion handler and suspends until the handler runs, `timeout` seconds pass
    /// (`onTimeout`) or the task is cancelled (`onCancel`).
    static func wait(
        operation: String, timeout: TimeInterval, onTimeout: Result, onCancel: Result,
        _ ask: (@escaping @Sendable (Result) -> Void) -> Void
    ) async -> Result {
        let answer = DelegateAnswer(operation: operation)
        let nanoseconds = Int(timeout.clampedNanoseconds)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak answer] in
            answer?.decide(onTimeout, fromDelegate: false)
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result, Never>) in
                let early = answer.state.withLock { state -> Result? in
                    if let decided = state.decided { return decided }
                    state.continuation = continuation
                    return nil
                }
                if let early {
                    continuation.resume(returning: early)
                    return
                }
                ask { result in answer.decide(result, fromDelegate: true) }
            }
        } onCancel: {
            answer.decide(onCancel, fromDelegate: false)
        }
    }

    private func decide(_ result: Result, fromDelegate: Bool) {
        let (continuation, repeated) = state.withLock { state -> (CheckedContinuation<Result, Never>?, Bool) in
            if fromDelegate { state.delegateAnswers += 1 }
            let repeated = fromDelegate && state.delegateAnswers > 1
            guard state.decided == nil else { return (nil, repeated) }
            state.decided = result
            defer { state.continuation = nil }
            return (state.continuation, repeated)
        }
        continuation?.resume(returning: result)
        if repeated { RuntimeIssues.report(.completionCalledMoreThanOnce(operation: operation)) }
    }
}
