import Benchmark
import Dispatch
import Foundation
import IdentityRuntime

/// Raw primitive vs identity-carrying wrapper, side by side in one run. Each pair shares a name prefix so
/// `swift package benchmark` lists them together; allocations and instructions per operation are tracked
/// and their thresholds kept in `Thresholds/`.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .instructions, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 1_000
    )

    let alice: Identity = "alice@contoso.com"
    let rawSerial = DispatchQueue(label: "bench.raw")
    let wrappedSerial = IdentityDispatchQueue(label: "bench.wrapped")
    let sink = Sink()

    // MARK: async

    Benchmark("async serial: raw DispatchQueue") { benchmark in
        for index in benchmark.scaledIterations { rawSerial.async { sink.add(index) } }
        rawSerial.sync {}
    }
    Benchmark("async serial: IdentityDispatchQueue, submitter with identity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations { wrappedSerial.async { sink.add(index) } }
        }
        wrappedSerial.sync {}
    }
    Benchmark("async serial: IdentityDispatchQueue, submitter without identity") { benchmark in
        for index in benchmark.scaledIterations { wrappedSerial.async { sink.add(index) } }
        wrappedSerial.sync {}
    }

    // MARK: sync

    Benchmark("sync serial: raw DispatchQueue") { benchmark in
        for index in benchmark.scaledIterations { rawSerial.sync { sink.add(index) } }
    }
    Benchmark("sync serial: IdentityDispatchQueue, caller with identity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations { wrappedSerial.sync { sink.add(index) } }
        }
    }

    // MARK: operation queues

    let rawOperations = OperationQueue()
    let wrappedOperations = IdentityOperationQueue()
    Benchmark("addOperation(block): raw OperationQueue") { benchmark in
        for index in benchmark.scaledIterations { rawOperations.addOperation { sink.add(index) } }
        rawOperations.waitUntilAllOperationsAreFinished()
    }
    Benchmark("addOperation(block): IdentityOperationQueue, enqueuer with identity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations { wrappedOperations.addOperation { sink.add(index) } }
        }
        wrappedOperations.waitUntilAllOperationsAreFinished()
    }

    // MARK: reads

    Benchmark("read: bare TaskLocal") { benchmark in
        BareTaskLocal.$value.withValue(alice) {
            for _ in benchmark.scaledIterations { blackHole(BareTaskLocal.value) }
        }
    }
    Benchmark("read: effectiveFileIdentity, thread identity set") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveFileIdentity) }
        }
    }
    Benchmark("read: effectiveUIIdentity, nothing set") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveUIIdentity) }
    }

    // MARK: scopes

    Benchmark("scope: TaskLocal.withValue") { benchmark in
        for _ in benchmark.scaledIterations { BareTaskLocal.$value.withValue(alice) { blackHole(1) } }
    }
    Benchmark("scope: IdentityContext.withThreadIdentity") { benchmark in
        for _ in benchmark.scaledIterations { IdentityContext.withThreadIdentity(alice) { blackHole(1) } }
    }
}

enum BareTaskLocal {
    @TaskLocal static var value: Identity?
}

/// Work for the benchmarked closures: touched only from one serial queue at a time.
final class Sink: @unchecked Sendable {
    private var total = 0
    func add(_ value: Int) { total &+= value }
}
