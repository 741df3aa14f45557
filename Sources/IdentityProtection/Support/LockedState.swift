import Synchronization
#if canImport(Glibc)
import CIdentityCrypto
#endif

/// Shared mutable state behind a `Synchronization.Mutex`: the module's one lock type.
///
/// On Linux `Mutex` locks with futexes, which ThreadSanitizer does not see, so under
/// `--sanitize=thread` it would report the protected state as racing. This wrapper adds ThreadSanitizer's
/// acquire/release annotations around the critical section (no-ops in builds without the sanitizer).
final class LockedState<Value>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: sending Value) {
        mutex = Mutex(value)
    }

    func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            #if canImport(Glibc)
            let address = Unmanaged.passUnretained(self).toOpaque()
            cidc_tsan_acquire(address)
            defer { cidc_tsan_release(address) }
            #endif
            return try body(&value)
        }
    }
}
