import Foundation

/// An `OperationQueue` that carries the enqueuer's thread identity into every operation it runs.
///
/// Propagation rules (see ``IdentityContext`` for the whole table):
/// - Every way of enqueuing work captures the enqueuer's thread identity **at enqueue**:
///   ``addOperation(_:)-(Operation)``, ``addOperation(_:)-(()->Void)``,
///   ``addOperations(_:waitUntilFinished:)`` and ``addBarrierBlock(_:)``. The operation's `start()` and
///   `main()` observe exactly that identity (`nil` stays `nil`); ``addOperation(flow:file:line:_:)-(_,_,_,Operation)`` chooses another.
/// - When an operation ends, the worker thread's identity is exactly what it was before.
/// - Dependencies, cancellation, `queuePriority`, `qualityOfService`, `maxConcurrentOperationCount`,
///   `isSuspended`, `waitUntilAllOperationsAreFinished()` and completion blocks work as on a plain
///   `OperationQueue`.
///
/// ## How arbitrary operations carry identity
/// Blocks are wrapped directly, and an ``IdentityOperation`` subclass is enqueued as it is (it binds the
/// identity captured at enqueue in its own `start()`; the fastest way). An `Operation` of any other class
/// is run by a small carrier operation
/// that the queue schedules in its place: the carrier takes the operation's dependencies, priority and
/// quality of service at enqueue, calls its `start()` under the captured identity, and (for an
/// asynchronous operation) stays executing until it finishes, so concurrency limits still count it.
/// The inherited `operations` list shows the carriers; cancelling through the queue cancels the operations
/// they carry.
///
/// > Note: Dependencies added to an operation *after* it was enqueued are not seen by its carrier, and a
/// > custom `isReady` override is checked only when the carrier starts it; add dependencies first.
open class IdentityOperationQueue: OperationQueue, @unchecked Sendable {
    /// Enqueues `operation`; it runs under the enqueuer's thread identity, captured now.
    open override func addOperation(_ operation: Operation) {
        super.addOperation(Self.carrier(for: operation, snapshot: IdentitySnapshot.capture(), site: .unknown))
    }

    /// Enqueues `operation` under the identity `flow` gives it, captured now.
    open func addOperation(
        flow: IdentityFlow, file: StaticString = #fileID, line: UInt = #line, _ operation: Operation
    ) {
        super.addOperation(Self.carrier(
            for: operation, snapshot: IdentitySnapshot.capture(flow: flow), site: SubmitSite(fileID: file, line: line)))
    }

    /// Enqueues a block; it runs under the enqueuer's thread identity, captured now.
    open override func addOperation(_ block: @escaping @Sendable () -> Void) {
        enqueueBlock(IdentitySnapshot.capture(), site: .unknown, block)
    }

    /// Enqueues a block under the identity `flow` gives it, captured now.
    open func addOperation(
        flow: IdentityFlow, file: StaticString = #fileID, line: UInt = #line, _ block: @escaping @Sendable () -> Void
    ) {
        enqueueBlock(IdentitySnapshot.capture(flow: flow), site: SubmitSite(fileID: file, line: line), block)
    }

    /// Enqueues `operations`, each under the enqueuer's thread identity captured now, and optionally waits
    /// until all of them have finished.
    open override func addOperations(_ operations: [Operation], waitUntilFinished wait: Bool) {
        let snapshot = IdentitySnapshot.capture()
        super.addOperations(
            operations.map { Self.carrier(for: $0, snapshot: snapshot, site: .unknown) }, waitUntilFinished: wait)
    }

    /// Enqueues a barrier block: it runs after every operation enqueued before it, under the enqueuer's
    /// thread identity captured now, and operations enqueued after it wait for it.
    open override func addBarrierBlock(_ barrier: @escaping @Sendable () -> Void) {
        super.addBarrierBlock(IdentitySnapshot.capture().prepare(site: .unknown, barrier).run)
    }

    // MARK: Wrapping

    private static func carrier(for operation: Operation, snapshot: IdentitySnapshot, site: SubmitSite) -> Operation {
        if let operation = operation as? IdentityOperation {
            // It carries identity itself: no carrier.
            operation.capture(snapshot, site: site)
            return operation
        }
        return IdentityCarrierOperation(carrying: operation, snapshot: snapshot, site: site)
    }

    private func enqueueBlock(_ snapshot: IdentitySnapshot, site: SubmitSite, _ block: @escaping @Sendable () -> Void) {
        let unit = snapshot.prepare(site: site, block)
        let operation = IdentityBlockOperation(unit)
        operation.qualityOfService = qualityOfService
        super.addOperation(operation)
    }
}
