import Benchmark
import Foundation
import IdentityRuntime
import ServiceContextModule

/// `OperationQueue.addOperation`, with a block and with an `Operation` subclass (which the wrapper runs
/// through a carrier operation).
func registerOperationBenchmarks() {
    let rawOperations = OperationQueue()
    let wrappedOperations = IdentityOperationQueue()
    let sink = Sink()
    let sinkLock = NSLock()

    Benchmark("AddOperationBlock.RawOperationQueue") { benchmark in
        for index in benchmark.scaledIterations { rawOperations.addOperation { blackHole(index) } }
        rawOperations.waitUntilAllOperationsAreFinished()
    }
    Benchmark("AddOperationBlock.WrappedWithIdentity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations { wrappedOperations.addOperation { blackHole(index) } }
        }
        wrappedOperations.waitUntilAllOperationsAreFinished()
    }

    Benchmark("AddOperationSubclass.RawOperationQueue") { benchmark in
        for index in benchmark.scaledIterations {
            rawOperations.addOperation(SumOperation(index, into: sink, lock: sinkLock))
        }
        rawOperations.waitUntilAllOperationsAreFinished()
    }
    Benchmark("AddOperationSubclass.PeerTaskLocal") { benchmark in
        BareTaskLocal.$value.withValue(alice) {
            for index in benchmark.scaledIterations {
                rawOperations.addOperation(PeerTaskLocalSumOperation(index, into: sink, lock: sinkLock))
            }
        }
        rawOperations.waitUntilAllOperationsAreFinished()
    }
    Benchmark("AddOperationSubclass.PeerServiceContext") { benchmark in
        ServiceContext.withValue(aliceContext) {
            for index in benchmark.scaledIterations {
                rawOperations.addOperation(PeerServiceContextSumOperation(index, into: sink, lock: sinkLock))
            }
        }
        rawOperations.waitUntilAllOperationsAreFinished()
    }
    // Any Operation subclass: the wrapper queue runs it through a carrier operation.
    Benchmark("AddOperationSubclass.WrappedWithIdentity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations {
                wrappedOperations.addOperation(SumOperation(index, into: sink, lock: sinkLock))
            }
        }
        wrappedOperations.waitUntilAllOperationsAreFinished()
    }
    // An IdentityOperation subclass: the wrapper queue runs it as it is.
    Benchmark("AddOperationSubclass.IdentityOperation") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations {
                wrappedOperations.addOperation(IdentitySumOperation(index, into: sink, lock: sinkLock))
            }
        }
        wrappedOperations.waitUntilAllOperationsAreFinished()
    }
}

/// What every benchmarked operation does in `main()`: adds its value to the shared sink under the lock.
private struct SumWork {
    let value: Int
    let sink: Sink
    let lock: NSLock

    func run() {
        lock.lock()
        sink.add(value)
        lock.unlock()
    }
}

/// A minimal synchronous `Operation` subclass.
private final class SumOperation: Operation, @unchecked Sendable {
    private let work: SumWork

    init(_ value: Int, into sink: Sink, lock: NSLock) { work = SumWork(value: value, sink: sink, lock: lock) }

    override func main() { work.run() }
}

/// The TaskLocal peer: captures the task-local when created, rebinds it in `main()`.
private final class PeerTaskLocalSumOperation: Operation, @unchecked Sendable {
    private let work: SumWork
    private let captured = BareTaskLocal.value

    init(_ value: Int, into sink: Sink, lock: NSLock) { work = SumWork(value: value, sink: sink, lock: lock) }

    override func main() { BareTaskLocal.$value.withValue(captured) { work.run() } }
}

/// The ServiceContext peer: captures the current context when created, rebinds it in `main()`.
private final class PeerServiceContextSumOperation: Operation, @unchecked Sendable {
    private let work: SumWork
    private let captured = ServiceContext.current

    init(_ value: Int, into sink: Sink, lock: NSLock) { work = SumWork(value: value, sink: sink, lock: lock) }

    override func main() { ServiceContext.withValue(captured) { work.run() } }
}

/// The same operation on the runtime's base class.
private final class IdentitySumOperation: IdentityOperation, @unchecked Sendable {
    private let work: SumWork

    init(_ value: Int, into sink: Sink, lock: NSLock) { work = SumWork(value: value, sink: sink, lock: lock) }

    override func main() { work.run() }
}
