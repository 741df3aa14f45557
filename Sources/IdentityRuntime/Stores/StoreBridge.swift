internal import CIdentityTask
import Foundation

/// The bridge between the runtime's synchronous entry points and stores that answer asynchronously (a key
/// store or a policy source that reaches a database or a network).
///
/// A store with asynchronous requirements also answers the synchronous ones, which GCD blocks and operations
/// call: from its cache when it can, and on a miss through ``wait(for:operation:timeout:timedOut:_:)``, which
/// does one of two things:
///
/// - **Inside ``withoutBlocking(isolation:_:)``** (the asynchronous entry points of the protection managers
///   and `PolicyManager`): it never waits. It records the fetch and throws `timedOut()`; the enclosing
///   `withoutBlocking` then awaits the fetch (suspending, never blocking a thread) and runs the synchronous
///   operation again, which this time gets the fetched answer (or its error) from the first attempt. The
///   operation therefore has to be one that may be run again after it failed, as every operation that can fail
///   on a store already must be: it leaves nothing behind when it throws.
/// - **Anywhere else**, it blocks the calling thread until the fetch answers or `timeout` passes (then it
///   throws `timedOut()`; the fetch is cancelled). The fetch runs on the bridge's own executor, never on
///   Swift's cooperative pool, so a blocked thread cannot starve it. Blocking is right on a GCD or
///   `OperationQueue` thread; inside a Swift task it occupies one of the few cooperative threads, so strict
///   mode (``IdentityStrictMode``) reports it as ``RuntimeIssue/blockingWaitInTask(operation:)`` (fatal with
///   `IDENTITY_STRICT=fatal`): use the asynchronous entry point there.
///
/// ```swift
/// func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
///     if let key = cache[identity] { return key }
///     return try StoreBridge.wait(
///         for: "current:\(identity.name)", operation: "current key of \(identity.name)", timeout: .seconds(2),
///         timedOut: .keyStoreUnavailable(reason: "no answer in 2 s")
///     ) { () async throws(ProtectionError) in
///         try await self.currentKey(for: identity, deadline: .now + .seconds(2))
///     }
/// }
/// ```
public enum StoreBridge {
    /// The answer of a store's synchronous requirement that may have to wait for the store.
    ///
    /// - Parameters:
    ///   - key: names the request: the store and what it asks (for example `ObjectIdentifier(self)`, the
    ///     account and the key ID). A second call with the same key (and the same `Value` and `Failure` types)
    ///     in the same ``withoutBlocking(isolation:_:)`` run gets the first answer, so two stores must never
    ///     use the same key for different requests: include the store's identity.
    ///   - operation: what is being waited for, in strict-mode reports.
    ///   - timeout: how long the call may wait for `fetch`, blocking or not; then `timedOut()`.
    ///   - timedOut: the error thrown when the wait gave up, and when the call was deferred to the enclosing
    ///     asynchronous run (the caller never sees that one: the run fetches and tries again).
    ///   - fetch: the asynchronous answer. It runs once per call (or once per key in an asynchronous run).
    public static func wait<Value: Sendable, Failure: Error>(
        for key: some Hashable & Sendable,
        operation: @autoclosure () -> String,
        timeout: Duration,
        timedOut: @autoclosure () -> Failure,
        _ fetch: @escaping @Sendable () async throws(Failure) -> Value
    ) throws(Failure) -> Value {
        if let run = NonBlockingRun.current {
            // The answer's type is part of the key: requests of different kinds never meet.
            let key = AnyHashable(RequestKey(request: AnyHashable(key), answer: ObjectIdentifier(Result<Value, Failure>.self)))
            if let answer = run.pointee.answers[key], let result = answer as? Result<Value, Failure> {
                return try result.get()
            }
            if !run.pointee.deferred.contains(where: { $0.key == key }) {
                let expired = Result<Value, Failure>.failure(timedOut())
                run.pointee.deferred.append(DeferredFetch(key: key, timeout: timeout, expired: expired) { () async -> any Sendable in
                    do throws(Failure) {
                        return Result<Value, Failure>.success(try await fetch())
                    } catch {
                        return Result<Value, Failure>.failure(error)
                    }
                })
            }
            throw timedOut()
        }
        if identity_current_task() != nil, DiagnosticsScope.current.strict {
            RuntimeIssues.report(.blockingWaitInTask(operation: operation()))
        }
        // The fetch runs on a thread of its own: never a cooperative thread the caller may hold, never a GCD
        // worker, and never behind another blocked wait (a fetch that itself waits on a store, or one that
        // blocks, stalls only its own thread).
        let waiter = BlockingWaiter<Result<Value, Failure>>()
        let executor = SingleTaskThreadExecutor()
        let task = Task(executorPreference: executor) { () async in
            defer { executor.finish() }
            do throws(Failure) {
                waiter.fulfil(.success(try await fetch()))
            } catch {
                waiter.fulfil(.failure(error))
            }
        }
        guard let result = waiter.wait(for: timeout) else {
            task.cancel()
            throw timedOut()
        }
        return try result.get()
    }

    /// Runs the synchronous `operation` from asynchronous code without ever blocking the thread on a store:
    /// every ``wait(for:operation:timeout:timedOut:_:)`` inside it is deferred, awaited here (at most its
    /// `timeout`; a cancelled task stops waiting at once, with `timedOut()`), and `operation` runs again with
    /// the answers, until it completes without deferring (at most 16 rounds; after that the last error stands).
    ///
    /// With every answer at hand (a warm cache), `operation` runs once, inline, on the caller's executor.
    /// The thread and task identity of the caller is the identity of every round.
    @inlinable
    public static func withoutBlocking<Value, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ operation: () throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        var run = NonBlockingRun()
        defer { run.releaseHeld() }
        var rounds = 0
        while true {
            // The operation is synchronous: the run is reachable from the thread it runs on, for exactly as long.
            let outcome = withUnsafeMutablePointer(to: &run) { (pointer) -> Result<Value, Failure> in
                let previous = NonBlockingRun.current
                NonBlockingRun.current = pointer
                defer { NonBlockingRun.current = previous }
                do throws(Failure) {
                    return .success(try operation())
                } catch {
                    return .failure(error)
                }
            }
            switch outcome {
            case let .success(value):
                return value
            case let .failure(error):
                rounds += 1
                let pending = run.deferred
                run.deferred = []
                guard !pending.isEmpty, rounds < 16 else { throw error }
                for fetch in pending {
                    run.answers[fetch.key] = await fetch.answer()
                }
            }
        }
    }

    /// Inside a ``withoutBlocking(isolation:_:)`` round that deferred a fetch: keeps `release` to be called
    /// when the run ends (returns `true`), so that something the round held (a creation in flight, say) stays
    /// held while the run awaits the fetch and runs again. Elsewhere: `false`, and the caller releases it.
    package static func holdUntilRunEnds(_ release: @escaping @Sendable () -> Void) -> Bool {
        guard let run = NonBlockingRun.current, !run.pointee.deferred.isEmpty else { return false }
        run.pointee.held.append(release)
        return true
    }
}

/// A request in a run: the store's key and the type of its answer.
struct RequestKey: Hashable, @unchecked Sendable {
    // `request` came in as `some Hashable & Sendable`.
    let request: AnyHashable
    let answer: ObjectIdentifier
}

/// A fetch a round deferred: awaited with its timeout, and given up (with `expired`) when the timeout passes
/// or the awaiting task is cancelled.
@usableFromInline
struct DeferredFetch: @unchecked Sendable {
    // `key` came in as `some Hashable & Sendable`.
    @usableFromInline let key: AnyHashable
    let timeout: Duration
    let expired: any Sendable
    let fetch: @Sendable () async -> any Sendable

    init(key: AnyHashable, timeout: Duration, expired: any Sendable, fetch: @escaping @Sendable () async -> any Sendable) {
        self.key = key
        self.timeout = timeout
        self.expired = expired
        self.fetch = fetch
    }

    /// The fetch's answer, or `expired` after `timeout` or at cancellation, whichever comes first; a fetch
    /// still running then is cancelled and its answer dropped.
    @usableFromInline func answer() async -> any Sendable {
        let first = FirstAnswer()
        let fetch = self.fetch
        let expired = self.expired
        let timeout = self.timeout
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<any Sendable, Never>) in
                first.install(continuation)
                let work = Task { first.resolve(await fetch()) }
                let timer = Task {
                    // Cancelled only once another answer won (onResolved below): resolving then is a no-op.
                    try? await Task.sleep(for: timeout)
                    first.resolve(expired)
                }
                first.onResolved {
                    work.cancel()
                    timer.cancel()
                }
            }
        } onCancel: {
            first.resolve(expired)
        }
    }
}

/// The first of several answers (a fetch, a timer, a cancellation) resumes the continuation; the others are
/// dropped. An answer that comes before the continuation is installed waits for it.
private final class FirstAnswer: Sendable {
    private struct State {
        var continuation: CheckedContinuation<any Sendable, Never>?
        var early: (any Sendable)?
        var resolved = false
        var cleanup: (@Sendable () -> Void)?
    }

    private let state = LockedValue(State())

    func install(_ continuation: CheckedContinuation<any Sendable, Never>) {
        let early = state.withLock { state -> (any Sendable)? in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resolve(_ answer: any Sendable) {
        typealias Winner = (continuation: CheckedContinuation<any Sendable, Never>?, cleanup: (@Sendable () -> Void)?)
        let winner = state.withLock { state -> Winner? in
            guard !state.resolved else { return nil }
            state.resolved = true
            let continuation = state.continuation
            state.continuation = nil
            if continuation == nil { state.early = answer }
            return (continuation, state.cleanup)
        }
        guard let winner else { return }
        winner.continuation?.resume(returning: answer)
        winner.cleanup?()
    }

    func onResolved(_ cleanup: @escaping @Sendable () -> Void) {
        let resolved = state.withLock { state in
            if !state.resolved { state.cleanup = cleanup }
            return state.resolved
        }
        if resolved { cleanup() }
    }
}

/// The state of one ``StoreBridge/withoutBlocking(isolation:_:)`` run: the answers fetched so far, the
/// fetches the last round deferred, and what rounds hold until the run ends. It lives in the run's frame;
/// while the synchronous operation runs, the thread running it points to it (a thread-specific slot), so no
/// lock and no allocation is needed.
@usableFromInline
struct NonBlockingRun {
    @usableFromInline var answers: [AnyHashable: any Sendable] = [:]
    @usableFromInline var deferred: [DeferredFetch] = []
    var held: [@Sendable () -> Void] = []

    @usableFromInline init() {}

    /// Releases what rounds held (``StoreBridge/holdUntilRunEnds(_:)``).
    @usableFromInline mutating func releaseHeld() {
        guard !held.isEmpty else { return }
        let held = self.held
        self.held = []
        held.forEach { $0() }
    }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed with \(status)")
        return key
    }()

    /// The run whose operation the current thread is running, if any.
    @usableFromInline static var current: UnsafeMutablePointer<NonBlockingRun>? {
        get { pthread_getspecific(slot)?.assumingMemoryBound(to: NonBlockingRun.self) }
        set {
            let status = pthread_setspecific(slot, newValue.map { UnsafeRawPointer($0) })
            precondition(status == 0, "pthread_setspecific failed with \(status)")
        }
    }
}

/// A one-shot slot a thread blocks on until another fills it (a condition variable, with a deadline).
private final class BlockingWaiter<Value: Sendable>: Sendable {
    private let slot = LockedCondition<Value?>(nil)

    func fulfil(_ value: Value) {
        slot.withLockWakingWaiters { $0 = value }
    }

    /// The value, or `nil` when `timeout` passed first.
    func wait(for timeout: Duration) -> Value? {
        slot.withLock(waitingUntil: { $0 != nil }, timeout: timeout) { $0 }
    }
}

/// The executor of one blocking wait's fetch: a thread of its own that runs the fetch task's jobs until the
/// task ends, then exits. A fetch that blocks, or waits on another store, holds only this thread (on Linux,
/// libdispatch counts a worker blocked in a wait as busy until its monitor notices, so fetches queued behind
/// blocked GCD workers, and the cooperative pool beside them, could stall for most of a second).
private final class SingleTaskThreadExecutor: TaskExecutor, Sendable {
    private struct Queue {
        var jobs: [UnownedJob] = []
        var finished = false
    }

    private let queue = LockedCondition(Queue())

    init() {
        let thread = Thread { [self] in self.serve() }
        thread.name = "identity-runtime.store-bridge"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLockWakingWaiters { $0.jobs.append(job) }
    }

    /// The task is over: the thread exits once its queue is empty.
    func finish() {
        queue.withLockWakingWaiters { $0.finished = true }
    }

    private func serve() {
        let executor = asUnownedTaskExecutor()
        while true {
            // The jobs queued so far; `nil` once the queue is empty and finished.
            let batch = queue.withLock(waitingUntil: { !$0.jobs.isEmpty || $0.finished }) { queue -> [UnownedJob]? in
                if queue.jobs.isEmpty { return nil }
                defer { queue.jobs = [] }
                return queue.jobs
            }
            guard let batch else { return }
            for job in batch { job.runSynchronously(on: executor) }
        }
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}
