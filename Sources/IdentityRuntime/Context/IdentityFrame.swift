#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The binding one scope makes: the identity it runs under, plus any change the unscoped legacy setter
/// makes while the scope runs.
///
/// Every scope and every wrapped unit of work binds a fresh frame in ``IdentityContext``'s task-local.
/// Binding a task-local is what makes `Task {}` inherit: a task created inside the scope copies the
/// binding. A frame bound by a *synchronous* scope belongs to the thread that bound it, and only that thread,
/// only while the scope runs, may change it through `setCurrentThreadIdentity(_:)`; a frame bound by an
/// async scope never changes.
final class IdentityFrame: @unchecked Sendable {
    // Safety: `base` and `owner` are immutable; `isActive` is written and read only on the owner thread
    // (every reader checks `owner` first); the override is guarded by `overridden` + `override`.
    let base: Identity?
    private let owner: pthread_t?
    private var isActive: Bool
    private let overridden = Atomic<Bool>(false)
    private let override = Mutex<Identity?>(nil)

    /// A frame for a synchronous scope on the current thread (mutable while active).
    init(synchronous base: Identity?) {
        self.base = base
        self.owner = pthread_self()
        self.isActive = true
    }

    /// A frame for an async scope (never mutable).
    init(asynchronous base: Identity?) {
        self.base = base
        self.owner = nil
        self.isActive = false
    }

    /// The identity code bound to this frame observes.
    var identity: Identity? {
        if overridden.load(ordering: .acquiring) {
            return override.withLock { $0 }
        }
        return base
    }

    /// Whether the unscoped setter, called on this thread now, may change this frame.
    var acceptsUnscopedChange: Bool {
        guard let owner, isActive else { return false }
        return pthread_equal(owner, pthread_self()) != 0
    }

    /// Records an unscoped change. Call only when ``acceptsUnscopedChange`` is true.
    func setOverride(_ identity: Identity?) {
        override.withLock { $0 = identity }
        overridden.store(true, ordering: .releasing)
    }

    /// Ends the synchronous scope: later unscoped changes on this thread no longer reach this frame.
    func deactivate() {
        isActive = false
    }
}
