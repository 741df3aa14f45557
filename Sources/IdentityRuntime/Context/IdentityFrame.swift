internal import CIdentityTask
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
///
/// A frame made for one asynchronous unit (``init(unit:work:)``) also carries the unit's work: the one object
/// is both the closure context the queue holds and the binding the unit runs under, so a submission costs one
/// allocation for both. It takes its owner thread when the unit starts.
@usableFromInline
final class IdentityFrame: @unchecked Sendable {
    // Safety: `base` is immutable. `owner` and `ownerTask` are immutable, except in a unit frame, where the
    // thread that wins `claimed` writes them once before binding the frame (no other thread can see the frame
    // before that).
    // `isActive` and `work` are written and read only on the owner thread (every reader of `isActive` checks
    // `owner` first). Overrides are published through an atomic pointer to immutable boxes that stay alive
    // until the frame itself is released.
    let base: Identity?
    private var owner: pthread_t?
    /// The address of the task the owner thread ran when it bound the frame (`nil`: none). A task started
    /// with `Task.immediate` inside the scope runs its first part on the owner thread while the scope is
    /// active: it is another task, so its unscoped changes must not reach the scope that created it. Only
    /// compared while the scope is active, when that task is still running, so the address cannot be reused.
    private var ownerTask: UnsafeRawPointer?
    private var isActive: Bool
    /// The unit's work, for a unit frame, until it ran; ``ranWork`` in every other frame.
    private var work: @Sendable () -> Void
    /// Whether a thread has taken this unit frame to run it.
    private let claimed = Atomic<Bool>(false)
    /// The latest unscoped change, as a +1 `Unmanaged<Override>`; each box keeps the earlier ones alive, so a
    /// reader that loaded an older pointer can still read it while it holds the frame.
    private let latestOverride = Atomic<UnsafeRawPointer?>(nil)

    private final class Override {
        let identity: Identity?
        let previous: Override?

        init(_ identity: Identity?, previous: Override?) {
            self.identity = identity
            self.previous = previous
        }
    }

    /// A frame for a synchronous scope on the current thread (changeable while active).
    @usableFromInline
    init(synchronous base: Identity?) {
        self.base = base
        self.work = IdentityFrame.ranWork
        self.owner = pthread_self()
        self.ownerTask = identity_current_task()
        self.isActive = true
    }

    /// A frame for one asynchronous unit that runs `work` exactly once, on the thread that calls
    /// ``runUnit()``; it is changeable by that thread while the work runs.
    init(unit base: Identity?, work: @escaping @Sendable () -> Void) {
        self.base = base
        self.owner = nil
        self.isActive = false
        self.work = work
    }

    /// Runs the unit's work under this frame on the current thread, then deactivates the frame. A second
    /// call (queues run a block once, so only misuse gets here) runs nothing: the work was already released.
    func runUnit() {
        guard !claimed.exchange(true, ordering: .acquiringAndReleasing) else {
            RuntimeIssues.report(.unitRanTwice(site: .unknown))
            return
        }
        // Moving the work out of the frame releases it, and what it captured, when it returns, even while
        // tasks it created still hold the frame. A swap moves it; an optional binding would copy it.
        var work: @Sendable () -> Void = IdentityFrame.ranWork
        swap(&work, &self.work)
        owner = pthread_self()
        ownerTask = identity_current_task()
        isActive = true
        // Called from a closure, not passed as the operation: passing it retained its context once more.
        IdentityContext.bindingLocal.withValue(FrameBinding(self)) { work() }
        isActive = false
    }

    /// What a frame holds as its work when it has none (any but an unrun unit's): a function with no context.
    private static func ranWork() {}

    /// A frame for an async scope (never changes).
    @usableFromInline
    init(asynchronous base: Identity?) {
        self.base = base
        self.work = IdentityFrame.ranWork
        self.owner = nil
        self.isActive = false
    }

    deinit {
        if let pointer = latestOverride.load(ordering: .acquiring) {
            Unmanaged<Override>.fromOpaque(pointer).release()
        }
    }

    /// The identity code bound to this frame observes.
    var identity: Identity? {
        guard let pointer = latestOverride.load(ordering: .acquiring) else { return base }
        return Unmanaged<Override>.fromOpaque(pointer).takeUnretainedValue().identity
    }

    /// Whether the unscoped setter, called on this thread now, may change this frame.
    var acceptsUnscopedChange: Bool {
        // Only the owner thread may read `isActive` (it writes it): compare threads first.
        guard let owner, pthread_equal(owner, pthread_self()) != 0 else { return false }
        // The task is compared only while the scope is active, when the task that bound it is still running.
        return isActive && identity_current_task() == ownerTask
    }

    /// Records an unscoped change. Call only when ``acceptsUnscopedChange`` is true (so only the owner
    /// thread ever writes).
    func setOverride(_ identity: Identity?) {
        let previousPointer = latestOverride.load(ordering: .relaxed)
        let previous = previousPointer.map { Unmanaged<Override>.fromOpaque($0).takeUnretainedValue() }
        let box = Unmanaged.passRetained(Override(identity, previous: previous))
        latestOverride.store(UnsafeRawPointer(box.toOpaque()), ordering: .releasing)
        // The new box now owns the previous one; drop the frame's own +1 on it.
        if let previousPointer {
            Unmanaged<Override>.fromOpaque(previousPointer).release()
        }
    }

    /// Ends the synchronous scope: later unscoped changes on this thread no longer reach this frame.
    @usableFromInline
    func deactivate() {
        isActive = false
    }
}

/// The value of ``IdentityContext``'s task-local: the innermost frame, in a struct of its own.
///
/// A task-local's read and push copy and destroy the value through its type's value witnesses. For an
/// `Optional<IdentityFrame>` those are `Optional`'s generic ones (about 100 instructions per read); for a
/// struct whose one field is an optional class reference they are a retain and a release.
@usableFromInline
struct FrameBinding: Sendable {
    let frame: IdentityFrame?

    @usableFromInline
    init(_ frame: IdentityFrame?) {
        self.frame = frame
    }
}
