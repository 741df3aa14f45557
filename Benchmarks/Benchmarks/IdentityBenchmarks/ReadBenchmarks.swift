import Benchmark
import IdentityRuntime
import ServiceContextModule

/// Reading the effective identities vs reading a bare `TaskLocal`, and an identity scope vs a bare
/// `TaskLocal.withValue`.
func registerReadAndScopeBenchmarks() {
    Benchmark("Read.BareTaskLocal") { benchmark in
        BareTaskLocal.$value.withValue(alice) {
            for _ in benchmark.scaledIterations { blackHole(BareTaskLocal.value) }
        }
    }
    Benchmark("Read.PeerServiceContext") { benchmark in
        ServiceContext.withValue(aliceContext) {
            for _ in benchmark.scaledIterations { blackHole(ServiceContext.current?[IdentityContextKey.self]) }
        }
    }
    Benchmark("Read.EffectiveFileIdentityThreadSet") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveFileIdentity) }
        }
    }
    Benchmark("Read.EffectiveFileIdentityNothingSet") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveFileIdentity) }
    }
    Benchmark("Read.EffectiveUIIdentityThreadSet") { benchmark in
        IdentityContext.withThreadIdentity(alice) {
            for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveUIIdentity) }
        }
    }
    Benchmark("Read.EffectiveUIIdentityNothingSet") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(IdentityContext.effectiveUIIdentity) }
    }

    Benchmark("Scope.TaskLocalWithValue") { benchmark in
        for _ in benchmark.scaledIterations { BareTaskLocal.$value.withValue(alice) { blackHole(1) } }
    }
    Benchmark("Scope.WithThreadIdentity") { benchmark in
        for _ in benchmark.scaledIterations { IdentityContext.withThreadIdentity(alice) { blackHole(1) } }
    }
}
