#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``LockedValue`` a thread can wait on until another thread changes the value: the project's one condition
/// variable, for the places where a thread must block (guarded state that nobody waits for is a plain
/// ``LockedValue``).
///
/// It is built on the mutex of the ``LockedValue`` it holds, with a `pthread_cond_t` beside it, so
/// ThreadSanitizer sees every wait and wake-up (as it sees the lock). Every pthread return code is checked.
///
/// ```swift
/// let slot = LockedCondition<Int?>(nil)
/// // One thread:
/// slot.withLockWakingWaiters { $0 = 42 }
/// // Another thread blocks until the value is there, or the timeout passes:
/// let answer = slot.withLock(waitingUntil: { $0 != nil }, timeout: .seconds(2)) { $0 }
/// ```
package final class LockedCondition<Value> {
    private let locked: LockedValue<Value>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init(_ value: Value) {
        locked = LockedValue(value)
        condition = .pthreadObject(pthread_cond_t(), "pthread_cond_init") { pthread_cond_init($0, nil) }
    }

    deinit {
        condition.destroyPthreadObject("pthread_cond_destroy", pthread_cond_destroy)
    }

    /// Runs `body` with exclusive access to the value, waking nobody (for a change no waiter waits for).
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        try locked.withLock(body)
    }

    /// Runs `body` with exclusive access to the value, then wakes every thread waiting in
    /// ``withLock(waitingUntil:timeout:_:)`` (they test their condition again once the lock is released).
    package func withLockWakingWaiters<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try locked.withLock { (value: inout Value) throws(Failure) -> Result in
            defer {
                let status = pthread_cond_broadcast(condition)
                precondition(status == 0, "pthread_cond_broadcast failed with \(status)")
            }
            return try body(&value)
        }
    }

    /// Blocks the calling thread until `isReady` holds for the value, or until `timeout` (if any) passed, then
    /// runs `body` with exclusive access to the value; the lock is released on return and on throw.
    ///
    /// The lock is released while the thread waits and held whenever `isReady` and `body` run. After a timeout
    /// `body` still runs, on a value for which `isReady` may not hold: it decides what a timeout means.
    /// `timeout` is measured on the wall clock, as `pthread_cond_timedwait` does, from the first wait (none
    /// when `isReady` holds at once); one too long to express as a wall-clock time waits without a deadline.
    package func withLock<Result, Failure: Error>(
        waitingUntil isReady: (Value) -> Bool,
        timeout: Duration? = nil,
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        // Computed at the first wait, not before: a value that is ready needs no clock.
        var deadline: timespec?
        var timeout = timeout
        let mutex = locked.mutex
        let lockStatus = pthread_mutex_lock(mutex)
        precondition(lockStatus == 0, "pthread_mutex_lock failed with \(lockStatus)")
        defer {
            let unlockStatus = pthread_mutex_unlock(mutex)
            precondition(unlockStatus == 0, "pthread_mutex_unlock failed with \(unlockStatus)")
        }
        // Each test reads the value afresh: no access to it stays open while the lock is released.
        while !isReady(locked.value) {
            if let pending = timeout {
                deadline = Self.wallClockDeadline(after: pending)
                timeout = nil
            }
            if var deadline {
                let status = pthread_cond_timedwait(condition, mutex, &deadline)
                if status == ETIMEDOUT { break }
                precondition(status == 0, "pthread_cond_timedwait failed with \(status)")
            } else {
                let status = pthread_cond_wait(condition, mutex)
                precondition(status == 0, "pthread_cond_wait failed with \(status)")
            }
        }
        // An empty value is handed over as a copy, for the reason ``LockedValue/withLock(_:)`` gives.
        if MemoryLayout<Value>.size == 0 {
            var empty = locked.value
            return try body(&empty)
        }
        return try body(&locked.value)
    }

    /// The wall-clock time `timeout` from now, as `pthread_cond_timedwait` takes it.
    /// Now on the wall clock plus `timeout` (negative: now), or `nil` when that is past what `timespec` holds.
    private static func wallClockDeadline(after timeout: Duration) -> timespec? {
        var now = timespec()
        let status = clock_gettime(CLOCK_REALTIME, &now)
        precondition(status == 0, "clock_gettime failed with \(status)")
        let (seconds, attoseconds) = max(timeout, .zero).components
        let nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
        guard let wholeSeconds = time_t(exactly: seconds) else { return nil }
        let (partial, overflowed) = now.tv_sec.addingReportingOverflow(wholeSeconds)
        let (total, overflowedAgain) = partial.addingReportingOverflow(time_t(nanoseconds / 1_000_000_000))
        guard !overflowed, !overflowedAgain else { return nil }
        var deadline = timespec()
        deadline.tv_sec = total
        deadline.tv_nsec = numericCast(nanoseconds % 1_000_000_000)
        return deadline
    }
}

// Safety: the value is only reached under the mutex.
extension LockedCondition: @unchecked Sendable where Value: Sendable {}
