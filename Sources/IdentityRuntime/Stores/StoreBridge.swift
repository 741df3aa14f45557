import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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
    ///   - key: names the request within one operation (for example the account and the key ID): a second call
    ///     with the same key in the same ``withoutBlocking(isolation:_:)`` run gets the first answer.
    ///   - operation: what is being waited for, in strict-mode reports.
    ///   - timeout: how long a blocking wait lasts at most.
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
            let key = AnyHashable(key)
            if let answer = run.pointee.answers[key] {
                guard let result = answer as? Result<Value, Failure> else {
                    preconditionFailure("StoreBridge: the key \(key) was used for two kinds of answer in one run")
                }
                return try result.get()
            }
            if !run.pointee.deferred.contains(where: { $0.key == key }) {
                run.pointee.deferred.append((key, { () async -> any Sendable in
                    do throws(Failure) {
                        return Result<Value, Failure>.success(try await fetch())
                    } catch {
                        return Result<Value, Failure>.failure(error)
                    }
                }))
            }
            throw timedOut()
        }
        if withUnsafeCurrentTask(body: { $0 != nil }), DiagnosticsScope.current.strict {
            RuntimeIssues.report(.blockingWaitInTask(operation: operation()))
        }
        let waiter = BlockingWaiter<Result<Value, Failure>>()
        let task = Task(executorPreference: StoreBridgeExecutor.shared) { () async in
            do throws(Failure) {
                waiter.fulfil(.success(try await fetch()))
            } catch {
                waiter.fulfil(.failure(error))
            }
        }
        guard let result = waiter.wait(until: Date(timeIntervalSinceNow: Double(timeout.components.seconds)
            + Double(timeout.components.attoseconds) / 1e18)) else {
            task.cancel()
            throw timedOut()
        }
        return try result.get()
    }

    /// Runs the synchronous `operation` from asynchronous code without ever blocking the thread on a store:
    /// every ``wait(for:operation:timeout:timedOut:_:)`` inside it is deferred, awaited here, and `operation`
    /// runs again with the answers, until it completes without deferring (at most 16 rounds; after that the
    /// last error stands).
    ///
    /// With every answer at hand (a warm cache), `operation` runs once, inline, on the caller's executor.
    /// The thread and task identity of the caller is the identity of every round.
    @inlinable
    public static func withoutBlocking<Value, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ operation: () throws(Failure) -> Value
    ) async throws(Failure) -> Value {
        var run = NonBlockingRun()
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
                for (key, fetch) in pending {
                    run.answers[key] = await fetch()
                }
            }
        }
    }
}

/// The state of one ``StoreBridge/withoutBlocking(isolation:_:)`` run: the answers fetched so far and the
/// fetches the last round deferred. It lives in the run's frame; while the synchronous operation runs, the
/// thread running it points to it (a thread-specific slot), so no lock and no allocation is needed.
@usableFromInline
struct NonBlockingRun {
    @usableFromInline typealias Fetch = @Sendable () async -> any Sendable

    @usableFromInline var answers: [AnyHashable: any Sendable] = [:]
    @usableFromInline var deferred: [(key: AnyHashable, fetch: Fetch)] = []

    @usableFromInline init() {}

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
private final class BlockingWaiter<Value: Sendable>: @unchecked Sendable {
    // `value` is reached only while `condition` is locked.
    private let condition = NSCondition()
    private var value: Value?

    func fulfil(_ value: Value) {
        condition.lock()
        self.value = value
        condition.broadcast()
        condition.unlock()
    }

    /// The value, or `nil` when `deadline` passed first.
    func wait(until deadline: Date) -> Value? {
        condition.lock()
        defer { condition.unlock() }
        while value == nil {
            if !condition.wait(until: deadline) { break }
        }
        return value
    }
}

/// Where the fetches of blocking waits run: a thread of its own, so that a fetch never needs one of the
/// cooperative threads the waiting callers may be holding, nor a GCD worker (on Linux, libdispatch counts a
/// worker blocked in a wait as busy until its monitor notices, so a fetch queued behind blocked workers, and the
/// cooperative pool beside them, could stall for most of a second).
private final class StoreBridgeExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = StoreBridgeExecutor()

    // `jobs` is reached only while `condition` is locked.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    private init() {
        let thread = Thread { [unowned self] in self.serve() }
        thread.name = "identity-runtime.store-bridge"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func serve() {
        let executor = asUnownedTaskExecutor()
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let batch = jobs
            jobs = []
            condition.unlock()
            for job in batch { job.runSynchronously(on: executor) }
        }
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}
