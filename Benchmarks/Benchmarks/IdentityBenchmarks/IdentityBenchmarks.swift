import Benchmark
import Dispatch
import Foundation
import IdentityRuntime

/// Raw primitive vs identity-carrying wrapper, side by side in one run. Each pair shares a name prefix
/// (`AsyncSerial.Raw…` / `AsyncSerial.Wrapped…`); wall clock and allocations per 1,000 operations are
/// tracked and their p90 thresholds kept in `Thresholds/`. Names have no spaces: this version of the tool
/// writes threshold files with spaces turned into underscores but reads them back without that change.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .instructions, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 1_000,
        thresholds: [
            // Wall clock on a shared 2-core machine swings by 2–3x between runs for queue throughput (the
            // consumer thread keeps up or not): it only catches gross regressions. Compare the raw and the
            // wrapped member of a pair within one run instead.
            .wallClock: BenchmarkThresholds(relative: [.p90: 300.0]),
            // Allocations are what the design controls: a few per thousand operations of slack (the raw
            // OperationQueue's own bookkeeping varies), nothing more.
            .mallocCountTotal: BenchmarkThresholds(relative: [.p90: 2.0], absolute: [.p90: 5]),
        ]
    )

    let alice: Identity = "alice@contoso.com"
    let rawSerial = DispatchQueue(label: "bench.raw")
    let wrappedSerial = IdentityDispatchQueue(label: "bench.wrapped")
    let sink = Sink()

    // MARK: async

    Benchmark("AsyncSerial.RawDispatchQueue") { benchmark in
        for index in benchmark.scaledIterations { rawSerial.async { sink.add(index) } }
        rawSerial.sync {}
    }
    Benchmark("AsyncSerial.WrappedWithIdentity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations { wrappedSerial.async { sink.add(index) } }
        }
        wrappedSerial.sync {}
    }
    Benchmark("AsyncSerial.WrappedWithoutIdentity") { benchmark in
        for index in benchmark.scaledIterations { wrappedSerial.async { sink.add(index) } }
        wrappedSerial.sync {}
    }

    // MARK: sync

    Benchmark("SyncSerial.RawDispatchQueue") { benchmark in
        for index in benchmark.scaledIterations { rawSerial.sync { sink.add(index) } }
    }
    Benchmark("SyncSerial.WrappedWithIdentity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations { wrappedSerial.sync { sink.add(index) } }
        }
    }

    // MARK: operation queues

    let rawOperations = OperationQueue()
    let wrappedOperations = IdentityOperationQueue()
    Benchmark("AddOperationBlock.RawOperationQueue") { benchmark in
        for index in benchmark.scaledIterations { rawOperations.addOperation { sink.add(index) } }
        rawOperations.waitUntilAllOperationsAreFinished()
    }
    Benchmark("AddOperationBlock.WrappedWithIdentity") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for index in benchmark.scaledIterations { wrappedOperations.addOperation { sink.add(index) } }
        }
        wrappedOperations.waitUntilAllOperationsAreFinished()
    }

    // MARK: reads

    Benchmark("Read.BareTaskLocal") { benchmark in
        BareTaskLocal.$value.withValue(alice) {
            for _ in benchmark.scaledIterations { blackHole(BareTaskLocal.value) }
        }
    }
    Benchmark("Read.EffectiveFileIdentityThreadSet") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveFileIdentity) }
        }
    }
    Benchmark("Read.EffectiveUIIdentityNothingSet") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveUIIdentity) }
    }

    // MARK: scopes

    Benchmark("Scope.TaskLocalWithValue") { benchmark in
        for _ in benchmark.scaledIterations { BareTaskLocal.$value.withValue(alice) { blackHole(1) } }
    }
    Benchmark("Scope.WithThreadIdentity") { benchmark in
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
