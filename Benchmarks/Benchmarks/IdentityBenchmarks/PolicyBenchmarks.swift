import Benchmark
import Dispatch
import IdentityPolicy
import IdentityRuntime

/// The `setUIPolicyIdentity` handshake round trip (unmanaged, and managed with one no-op conditional-launch
/// check) against the bare asynchronous hop it is built on (a completion delivered on a global queue), and
/// `policy(for:)` against a bare dictionary lookup.
func registerPolicyBenchmarks() {
    let policies = StaticPolicySource([alice: Policy(identity: alice)])
    let manager = PolicyManager(policySource: policies)
    manager.setPrimaryUser(alice)
    manager.registerConditionalLaunchCheck(ClosureConditionalLaunchCheck { _, _ in .passes })
    let bob: Identity = "bob@fabrikam.com"

    Benchmark("UIPolicySwitch.RawCompletionHop", configuration: .init(scalingFactor: .one)) { benchmark in
        for _ in benchmark.scaledIterations {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume() }
            }
        }
    }
    Benchmark("UIPolicySwitch.Unmanaged", configuration: .init(scalingFactor: .one)) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await manager.setUIPolicyIdentity(bob, for: .main))
        }
    }
    Benchmark("UIPolicySwitch.ManagedOneCheck", configuration: .init(scalingFactor: .one)) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await manager.setUIPolicyIdentity(alice, for: .main))
        }
    }

    var bare: [Identity: Policy] = [:]
    for index in 0..<16 { bare[Identity("user\(index)@contoso.com")] = Policy(identity: alice) }
    bare[alice] = Policy(identity: alice)
    let dictionary = bare
    Benchmark("PolicyLookup.RawDictionary") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(dictionary[alice]) }
    }
    Benchmark("PolicyLookup.PolicyForIdentity") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(manager.policy(for: alice)) }
    }
}
