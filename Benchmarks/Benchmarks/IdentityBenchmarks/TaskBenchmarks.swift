import Benchmark
import IdentityRuntime
import ServiceContextModule

/// `Task {}` and task-group children, created outside and inside an identity scope: inside, each task copies
/// the scope's task-local binding.
func registerTaskBenchmarks() {
    Benchmark("TaskCreate.Raw") { benchmark in
        await createTasks(benchmark.scaledIterations.count)
    }
    Benchmark("TaskCreate.PeerTaskLocal") { benchmark in
        await BareTaskLocal.$value.withValue(alice) {
            await createTasks(benchmark.scaledIterations.count)
        }
    }
    Benchmark("TaskCreate.PeerServiceContext") { benchmark in
        await ServiceContext.withValue(aliceContext) {
            await createTasks(benchmark.scaledIterations.count)
        }
    }
    Benchmark("TaskCreate.InIdentityScope") { benchmark in
        await IdentityContext.withThreadIdentity(alice) {
            await createTasks(benchmark.scaledIterations.count)
        }
    }

    Benchmark("TaskGroupChildren.Raw") { benchmark in
        await addChildren(benchmark.scaledIterations.count)
    }
    Benchmark("TaskGroupChildren.InIdentityScope") { benchmark in
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
