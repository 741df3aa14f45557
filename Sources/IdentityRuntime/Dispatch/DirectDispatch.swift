#if canImport(CDispatch)
import CDispatch
#endif
import Dispatch

/// libdispatch's own queue object, for the queues whose object the runtime gets from libdispatch's public C
/// API: the global concurrent queues (`dispatch_get_global_queue`). A unit's frame is then the context of
/// `dispatch_async_f`: no block is made or copied, so an `async` costs one allocation (the frame, which also
/// holds the work) where the overlay's `async(execute:)` costs two (the frame and the block copy).
///
/// Every other queue (one made with `DispatchQueue(label:)`, one handed to `init(wrapping:)`, the main
/// queue) goes through the overlay's block API: on Linux the overlay keeps its libdispatch object in a
/// member of its own, with no public way to read it, and the runtime reads no other module's private
/// members. Where there is no `CDispatch` (Apple platforms), this forwards to the overlay's block API.
struct DirectQueue: @unchecked Sendable {
    // Safety: an immutable pointer to one of libdispatch's global queues, which are never deallocated.
    #if canImport(CDispatch)
    let queue: dispatch_queue_t

    /// The global concurrent queue of `qos`, the object `DispatchQueue.global(qos:)` wraps; nil for a class
    /// with no public priority constant (user-interactive), which takes the overlay.
    ///
    /// The overlay keeps the class's C value to itself, so this goes by libdispatch's documented mapping of
    /// the `DISPATCH_QUEUE_PRIORITY_*` constants to the classes: high is user-initiated, default is default
    /// (and unspecified, whose value is 0 as well), low is utility, background is background.
    init?(global qos: DispatchQoS.QoSClass) {
        let priority: Int
        switch qos {
        // DISPATCH_QUEUE_PRIORITY_BACKGROUND is INT16_MIN in the header, a macro Swift does not import.
        case .background: priority = Int(Int16.min)
        case .utility: priority = Int(CDispatch.DISPATCH_QUEUE_PRIORITY_LOW)
        case .default, .unspecified: priority = Int(CDispatch.DISPATCH_QUEUE_PRIORITY_DEFAULT)
        case .userInitiated: priority = Int(CDispatch.DISPATCH_QUEUE_PRIORITY_HIGH)
        case .userInteractive: return nil
        @unknown default: return nil
        }
        self.queue = dispatch_get_global_queue(priority, 0)
    }

    /// Submits `frame`'s unit; the queue's thread runs it with ``IdentityFrame/runUnit()`` and releases it.
    func async(_ frame: IdentityFrame) {
        dispatch_async_f(queue, Unmanaged.passRetained(frame).toOpaque()) { context in
            Unmanaged<IdentityFrame>.fromOpaque(context.unsafelyUnwrapped).takeRetainedValue().runUnit()
        }
    }
    #else
    // Elsewhere the overlay's queue is libdispatch's object itself; its block API is the path there.
    let queue: DispatchQueue

    init?(global qos: DispatchQoS.QoSClass) {
        self.queue = .global(qos: qos)
    }

    func async(_ frame: IdentityFrame) {
        queue.async { frame.runUnit() }
    }
    #endif
}
