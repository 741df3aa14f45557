import Benchmark
import Foundation
import IdentityRuntime

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
    Benchmark("AddOperationSubclass.WrappedWithIdentity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations {
                wrappedOperations.addOperation(SumOperation(index, into: sink, lock: sinkLock))
            }
        }
        wrappedOperations.waitUntilAllOperationsAreFinished()
    }
}

/// A minimal synchronous `Operation` subclass.
private final class SumOperation: Operation, @unchecked Sendable {
    private let value: Int
    private let sink: Sink
    private let lock: NSLock

    init(_ value: Int, into sink: Sink, lock: NSLock) {
        self.value = value
        self.sink = sink
        self.lock = lock
    }

    override func main() {
        lock.lock()
        sink.add(value)
        lock.unlock()
    }
}
