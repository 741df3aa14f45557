import Foundation

/// An `Operation` base class that carries identity itself: subclass it instead of `Operation`, and an
/// ``IdentityOperationQueue`` runs it directly, with no carrier operation in its place.
///
/// Propagation rules:
/// - Enqueued through an ``IdentityOperationQueue`` (``IdentityOperationQueue/addOperation(_:)-(Operation)``,
///   `addOperations`, ``IdentityOperationQueue/addOperation(flow:file:line:_:)-(_,_,_,Operation)``), it
///   runs under the identity captured **at enqueue**, exactly like any other operation on that queue.
/// - Otherwise (a plain `OperationQueue`, or `start()` called directly) it runs under the identity captured
///   **when it was created**, like an ``IdentityWorkItem``.
/// - `start()` and `main()` observe that identity; a change made with `setCurrentThreadIdentity(_:)` lasts
///   for the rest of the operation only; a `Task {}` created inside inherits it; when `start()` returns the
///   worker thread's identity is what it was before.
///
/// Dependencies, readiness (including a custom `isReady`), cancellation, priorities and asynchronous
/// subclasses work as they do on `Operation`, because the queue schedules the operation itself.
///
/// ```swift
/// final class Upload: IdentityOperation, @unchecked Sendable {
///     override func main() { send(for: IdentityContext.effectiveFileIdentity) }
/// }
/// IdentityContext.withThreadIdentity("alice@contoso.com") {
///     queue.addOperation(Upload())      // runs as alice@contoso.com
/// }
/// ```
///
/// > Note: For an asynchronous subclass, only the code `start()` runs (and tasks it creates) observe the
/// > identity; a completion that arrives later on another thread carries nothing unless it was submitted
/// > through the runtime.
open class IdentityOperation: Operation, @unchecked Sendable {
    // Safety: `captured` is written at creation and, by the queue, before the operation is handed to
    // `OperationQueue` (whose own locking orders that write before `start()` on the worker); `unit` is
    // written at the same moment and read only by `start()`.
    private var captured: Identity?
    /// Set when strict mode or a fault was on at enqueue: the checked unit that runs `start()`.
    private var unit: IdentitySnapshot.PreparedUnit?

    /// Creates an operation that captures the creator's thread identity (used unless an
    /// ``IdentityOperationQueue`` enqueues it, which captures the enqueuer's).
    public override init() {
        self.captured = IdentityContext.currentThreadIdentity
        super.init()
    }

    /// Records the identity captured at enqueue. Called by ``IdentityOperationQueue`` only.
    func capture(_ snapshot: IdentitySnapshot, site: SubmitSite) {
        captured = snapshot.identity
        guard DiagnosticsScope.isActive else { return }
        unit = snapshot.prepare(site: site) { [unowned self] in
            self.startWithoutIdentity()
        }
    }

    /// Starts the operation under the captured identity; see the type's propagation rules.
    open override func start() {
        if let unit {
            self.unit = nil
            unit.run()
            return
        }
        IdentityContext.withThreadIdentity(captured) {
            super.start()
        }
    }

    private func startWithoutIdentity() {
        super.start()
    }
}
