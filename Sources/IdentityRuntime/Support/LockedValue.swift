#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a `pthread_mutex_t`: the project's one lock type, for every module of the package.
///
/// Why not `Synchronization.Mutex`: on Linux it parks threads with raw futex calls that ThreadSanitizer does
/// not intercept, so under `--sanitize=thread` the state it protects is reported as racing whenever two
/// threads contend. `pthread_mutex_lock` is intercepted, so this lock is both correct and visible to the
/// sanitizer. Every pthread return code is checked.
package final class LockedValue<Value> {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Reached only under the mutex, which already makes every access exclusive, so the runtime's dynamic
    /// exclusivity check (a `swift_beginAccess` / `swift_endAccess` pair per `withLock`) is switched off.
    @usableFromInline @exclusivity(unchecked) var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .pthreadObject(pthread_mutex_t(), "pthread_mutex_init") { pthread_mutex_init($0, nil) }
    }

    deinit {
        mutex.destroyPthreadObject("pthread_mutex_destroy", pthread_mutex_destroy)
    }

    /// Runs `body` with exclusive access to the value; the lock is released on return and on throw.
    /// Inlinable, so that callers in other modules get it specialized for their value and closure.
    @inlinable
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let lockStatus = pthread_mutex_lock(mutex)
        precondition(lockStatus == 0, "pthread_mutex_lock failed with \(lockStatus)")
        defer {
            let unlockStatus = pthread_mutex_unlock(mutex)
            precondition(unlockStatus == 0, "pthread_mutex_unlock failed with \(unlockStatus)")
        }
        // A value of an empty type (a lock that guards something outside it) has no storage: the runtime gives
        // such a stored property offset 0, so ThreadSanitizer would see each inout access as a write to the
        // object's header, which every caller reads before it locks. Such a value is handed over as a copy.
        if MemoryLayout<Value>.size == 0 {
            var empty = value
            return try body(&empty)
        }
        return try body(&value)
    }
}

// Safety: the value is only reached under the mutex.
extension LockedValue: @unchecked Sendable where Value: Sendable {}
