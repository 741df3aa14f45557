#if canImport(CDispatch)
import CDispatch
#endif
import Dispatch

/// libdispatch's own queue object behind a `DispatchQueue`, for submitting a unit's frame as the context of
/// `dispatch_async_f` / `dispatch_sync_f`: no block is made or copied, so an `async` costs one allocation
/// (the frame, which also holds the work) where the overlay's `async(execute:)` costs one (the block copy)
/// plus whatever wraps the work.
///
/// On Linux the Swift overlay's `DispatchQueue` is a class that holds the C queue in a stored property
/// (`__wrapped`, from the toolchain's `CDispatch` module); it is read once, through reflection, when a
/// wrapper is made. Should that property ever be missing, ``init(_:)`` returns nil and the wrapper uses the
/// overlay. Where there is no `CDispatch` (Apple platforms), this forwards to the overlay's block API.
struct DirectQueue: @unchecked Sendable {
    // Safety: an immutable pointer to a thread-safe libdispatch object, kept alive by the `DispatchQueue`
    // the wrapper also holds.
    #if canImport(CDispatch)
    let queue: dispatch_queue_t

    init?(_ queue: DispatchQueue) {
        guard let child = Mirror(reflecting: queue).children.first(where: { $0.label == "__wrapped" }),
              let raw = child.value as? dispatch_queue_t
        else { return nil }
        self.queue = raw
    }

    /// Submits `frame`'s unit; the queue's thread runs it with ``IdentityFrame/runUnit()`` and releases it.
    func async(_ frame: IdentityFrame) {
        dispatch_async_f(queue, Unmanaged.passRetained(frame).toOpaque()) { context in
            Unmanaged<IdentityFrame>.fromOpaque(context.unsafelyUnwrapped).takeRetainedValue().runUnit()
        }
    }

    /// Runs `body` on the queue and waits for it, with the caller's non-escaping closure as the context.
    func sync(_ body: () -> Void) {
        withoutActuallyEscaping(body) { body in
            var call = body
            withUnsafeMutablePointer(to: &call) { pointer in
                dispatch_sync_f(queue, pointer) { context in
                    context.unsafelyUnwrapped.assumingMemoryBound(to: (() -> Void).self).pointee()
                }
            }
        }
    }
    #else
    // Elsewhere the overlay's queue is libdispatch's object itself; its block API is the path there.
    let queue: DispatchQueue

    init?(_ queue: DispatchQueue) {
        self.queue = queue
    }

    func async(_ frame: IdentityFrame) {
        queue.async { frame.runUnit() }
    }

    func sync(_ body: () -> Void) {
        queue.sync(execute: body)
    }
    #endif
}
