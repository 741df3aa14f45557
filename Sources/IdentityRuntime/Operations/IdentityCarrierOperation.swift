import Foundation

/// Runs an operation of any class under a captured identity, standing in for it in the queue.
///
/// It mirrors the carried operation's scheduling attributes (dependencies, priority, quality of service,
/// name) at enqueue, forwards cancellation, and finishes only once the carried operation has finished.
final class IdentityCarrierOperation: Operation, @unchecked Sendable {
    // Safety: both properties are immutable after init; Operation's own state is thread-safe.
    let carried: Operation
    private let snapshot: IdentitySnapshot

    init(carrying operation: Operation, snapshot: IdentitySnapshot) {
        self.carried = operation
        self.snapshot = snapshot
        super.init()
        for dependency in operation.dependencies {
            addDependency(dependency)
        }
        queuePriority = operation.queuePriority
        qualityOfService = operation.qualityOfService
        name = operation.name
    }

    override func main() {
        snapshot.run {
            if !carried.isFinished {
                carried.start()
            }
        }
        if carried.isAsynchronous {
            carried.waitUntilFinished()
        }
    }

    /// Cancelling the carrier cancels the carried operation; the carrier itself still runs so that the
    /// carried operation gets the chance to finish as cancelled (its dependents and waiters rely on that).
    override func cancel() {
        carried.cancel()
    }
}
