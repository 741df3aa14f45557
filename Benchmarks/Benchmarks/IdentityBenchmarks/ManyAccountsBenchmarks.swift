import Benchmark
import IdentityPolicy
import IdentityRuntime

/// A manager with 10,000 managed accounts, each with a distinct policy: `policy(for:)` and
/// `isIdentityManaged(_:)` of one account against a plain dictionary lookup of the same 10,000 policies
/// (what a user would write instead), in one run.
func registerManyAccountsBenchmarks() {
    let accounts = (0..<10_000).map { Identity("member\($0)@org\($0 % 100).example") }
    var policies: [Identity: Policy] = [:]
    for (index, account) in accounts.enumerated() {
        policies[account] = Policy(identity: account, appConfiguration: ["index": .number(Double(index))])
    }
    let dictionary = policies
    let manager = PolicyManager(policySource: StaticPolicySource(policies))
    let probe = accounts[4_321]

    Benchmark("ManyAccountsPolicy.RawDictionary") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(dictionary[probe]) }
    }
    Benchmark("ManyAccountsPolicy.PolicyForIdentity") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(manager.policy(for: probe)) }
    }
    Benchmark("ManyAccountsManaged.RawDictionary") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(dictionary[probe] != nil) }
    }
    Benchmark("ManyAccountsManaged.IsIdentityManaged") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(manager.isIdentityManaged(probe)) }
    }
}

/// A cached admission of a managed account (one admission check, passed before) against the bare
/// `withThreadIdentity` scope it ends in: what the service boundary adds per request.
func registerAdmissionBenchmarks() {
    let manager = PolicyManager(policySource: StaticPolicySource([alice: Policy(identity: alice)]))
    manager.registerAdmissionCheck(ClosureAdmissionCheck { _, _ in .admit })

    Benchmark("Admission.WithThreadIdentity") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(await IdentityContext.withThreadIdentity(alice) { IdentityContext.currentThreadIdentity })
        }
    }
    Benchmark("Admission.WithAdmittedIdentityCached") { benchmark in
        _ = try? await manager.withAdmittedIdentity(alice) {}
        for _ in benchmark.scaledIterations {
            blackHole(try? await manager.withAdmittedIdentity(alice) { IdentityContext.currentThreadIdentity })
        }
    }
}
