import Benchmark
import IdentityRuntime
import ServiceContextModule

/// `Task {}` and task-group children, created outside and inside an identity scope: inside, each task copies
/// the scope's task-local binding.
func registerTaskBenchmarks() {
    // The concurrency runtime serves some task allocations from its own allocator and some from malloc,
    // depending on timing: these counts moved by about 0.5 per task between runs (seen: 5,003 and 5,511 per
    // thousand for the same code, raw and peer members alike; task-group children 4,021 and 4,651 for the raw
    // member on two days, our member moving with it). 15% and 700 per thousand catch one more allocation per
    // task, not less.
    let taskConfiguration = Benchmark.Configuration(thresholds: [
        .mallocCountTotal: BenchmarkThresholds(relative: [.p90: 15.0], absolute: [.p90: 700]),
    ])
    Benchmark("TaskCreate.Raw", configuration: taskConfiguration) { benchmark in
        await createTasks(benchmark.scaledIterations.count)
    }
    Benchmark("TaskCreate.PeerTaskLocal", configuration: taskConfiguration) { benchmark in
        await BareTaskLocal.$value.withValue(alice) {
            await createTasks(benchmark.scaledIterations.count)
        }
    }
    Benchmark("TaskCreate.PeerServiceContext", configuration: taskConfiguration) { benchmark in
        await ServiceContext.withValue(aliceContext) {
            await createTasks(benchmark.scaledIterations.count)
        }
    }
    Benchmark("TaskCreate.InIdentityScope", configuration: taskConfiguration) { benchmark in
        await IdentityContext.withThreadIdentity(alice) {
            await createTasks(benchmark.scaledIterations.count)
        }
    }

    Benchmark("TaskGroupChildren.Raw", configuration: taskConfiguration) { benchmark in
        await addChildren(benchmark.scaledIterations.count)
    }
    Benchmark("TaskGroupChildren.InIdentityScope", configuration: taskConfiguration) { benchmark in
        await IdentityContext.withThreadIdentity(alice) {
            await addChildren(benchmark.scaledIterations.count)
        }
    }
}

private func createTasks(_ count: Int) async {
    var tasks: [Task<Int, Never>] = []
    tasks.reserveCapacity(count)
    for index in 0..<count { tasks.append(Task { index }) }
    for task in tasks { blackHole(await task.value) }
}

private func addChildren(_ count: Int) async {
    await withTaskGroup(of: Int.self) { group in
        for index in 0..<count { group.addTask { index } }
        for await value in group { blackHole(value) }
    }
}
