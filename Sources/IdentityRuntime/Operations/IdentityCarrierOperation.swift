import Foundation

/// Runs an operation of any class under a captured identity, standing in for it in the queue.
///
/// It mirrors the carried operation's scheduling attributes (dependencies, priority, quality of service,
/// name) at enqueue, forwards cancellation, starts the carried operation once it is ready, and finishes only
/// once the carried operation has finished.
final class IdentityCarrierOperation: Operation, @unchecked Sendable {
    // Safety: both properties are immutable after init; Operation's own state is thread-safe.
    let carried: Operation
    /// Starts the carried operation under the identity captured at enqueue.
    private let unit: IdentitySnapshot.PreparedUnit

    init(carrying operation: Operation, snapshot: IdentitySnapshot, site: SubmitSite) {
        self.carried = operation
        let handed = UncheckedOperation(operation)
        self.unit = snapshot.prepare(site: site) {
            if !handed.operation.isFinished {
                handed.operation.start()
            }
        }
        super.init()
        for dependency in operation.dependencies {
            addDependency(dependency)
        }
        queuePriority = operation.queuePriority
        qualityOfService = operation.qualityOfService
        name = operation.name
    }

    override func main() {
        waitUntilCarriedIsReady()
        unit.run()
        if carried.isAsynchronous {
            carried.waitUntilFinished()
        }
    }

    /// The carrier depends on everything the carried operation depends on, but Foundation updates the
    /// carried operation's readiness a moment after its last dependency finishes (and a subclass may
    /// compute readiness itself), while starting an operation that is not ready is a fatal error. So wait,
    /// yielding and then sleeping briefly, until it is ready or cancelled.
    private func waitUntilCarriedIsReady() {
        var attempts = 0
        while !carried.isReady && !carried.isCancelled && !carried.isFinished {
            if attempts < 64 {
                sched_yield()
            } else {
                usleep(UInt32(min(1_000, attempts)))
            }
            attempts += 1
        }
    }

    /// Cancelling the carrier cancels the carried operation; the carrier itself still runs so that the
    /// carried operation gets the chance to finish as cancelled (its dependents and waiters rely on that).
    override func cancel() {
        carried.cancel()
    }
}

/// An operation handed to a unit that runs on another thread; Foundation's `Operation` is thread-safe but
/// not marked `Sendable` in every overlay.
struct UncheckedOperation: @unchecked Sendable {
    let operation: Operation
    init(_ operation: Operation) { self.operation = operation }
}

/// A block operation whose single block is a prepared unit; cancelling it tells strict mode that the unit
/// is not run on purpose.
final class IdentityBlockOperation: BlockOperation, @unchecked Sendable {
    private let tracker: UnitTracker?

    init(_ unit: IdentitySnapshot.PreparedUnit) {
        self.tracker = unit.tracker
        super.init()
        addExecutionBlock(unit.run)
    }

    override func cancel() {
        tracker?.markCancelled()
        super.cancel()
    }
}
