import Foundation

/// A value behind an `NSLock`, for the state this package shares between calls.
///
/// Not `Synchronization.Mutex`: on Linux it parks threads with futex calls that ThreadSanitizer does not see,
/// so the full lane's TSan run of this package reported every contended access as a race. `NSLock` is a
/// pthread mutex, which the sanitizer intercepts.
package final class Locked<Value>: @unchecked Sendable {
    // Safety: `value` is only reached inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
