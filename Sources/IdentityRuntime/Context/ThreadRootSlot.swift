#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A thread's identity outside every scope: what `setCurrentThreadIdentity(_:)` sets on a thread that runs
/// no wrapped unit and no `withThreadIdentity` scope (the main thread of a legacy app, a raw `Thread`).
///
/// Stored in a pthread-specific slot; the boxed value is released when the thread exits.
enum ThreadRootSlot {
    private final class Box {
        var identity: Identity? {
            didSet { ThreadRootSlot.record(self) }
        }
        let thread: String

        init(_ identity: Identity?) {
            self.identity = identity
            self.thread = "\(pthread_self())"
            ThreadRootSlot.record(self)
        }

        deinit {
            // The thread is ending.
            if identity != nil { ThreadRootSlot.threadsWithRoot.subtract(1, ordering: .relaxed) }
            ThreadRootSlot.held.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) }
            if let identity, IdentityStrictMode.isEnabled {
                RuntimeIssues.report(.unscopedIdentityNotReset(thread: thread, identity: identity))
            }
        }
    }

    /// Every thread's non-nil root identity, for strict mode's report of identities never reset.
    private static let held = LockedValue<[ObjectIdentifier: (thread: String, identity: Identity)]>([:])

    private static func record(_ box: Box) {
        let key = ObjectIdentifier(box)
        let entry = box.identity.map { (thread: box.thread, identity: $0) }
        held.withLock { $0[key] = entry }
    }

    /// The threads that currently hold a root identity, and the identity each holds.
    static func heldIdentities() -> [(thread: String, identity: Identity)] {
        held.withLock { Array($0.values) }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            #if canImport(Darwin)
            Unmanaged<AnyObject>.fromOpaque(pointer).release()
            #else
            if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
            #endif
        }
        precondition(status == 0, "pthread_key_create failed with \(status)")
        return key
    }()

    /// How many threads hold a non-nil root identity. Each thread adds and removes only its own, so a thread
    /// that holds one always reads at least 1 here (its own update comes first in the counter's order): a
    /// read that finds 0 needs no thread-specific lookup.
    private static let threadsWithRoot = Atomic<Int>(0)

    /// The current thread's root identity (nil when never set or set back to nil).
    static var identity: Identity? {
        guard threadsWithRoot.load(ordering: .relaxed) > 0, let pointer = pthread_getspecific(key) else {
            return nil
        }
        return Unmanaged<Box>.fromOpaque(pointer).takeUnretainedValue().identity
    }

    static func set(_ identity: Identity?) {
        if let pointer = pthread_getspecific(key) {
            let box = Unmanaged<Box>.fromOpaque(pointer).takeUnretainedValue()
            switch (box.identity != nil, identity != nil) {
            case (false, true): threadsWithRoot.add(1, ordering: .relaxed)
            case (true, false): threadsWithRoot.subtract(1, ordering: .relaxed)
            default: break
            }
            box.identity = identity
            return
        }
        guard identity != nil else { return }
        threadsWithRoot.add(1, ordering: .relaxed)
        let pointer = Unmanaged.passRetained(Box(identity)).toOpaque()
        let status = pthread_setspecific(key, pointer)
        precondition(status == 0, "pthread_setspecific failed with \(status)")
    }
}
