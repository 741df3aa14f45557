import Benchmark
import IdentityAssertions
import IdentityPolicy
import IdentityProtection
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

/// Verifying a signed identity assertion (parse, header rules, Ed25519, claims, replay cache) against the bare
/// Ed25519 verification of the same bytes through the same libcrypto.
func registerAssertionBenchmarks() {
    guard let key = try? AssertionSigningKey() else { return }
    let signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "frontend")
    let tokens = (0..<20_000).compactMap { _ in try? signer.sign(account: alice, tenant: "contoso.com", audience: "documents") }
    let verifier = IdentityAssertionVerifier(keys: ["k1": key.publicKey], issuers: ["frontend"], audience: "documents",
                                             replayCacheCapacity: 1_000_000)
    let parts = tokens[0].split(separator: ".")
    let message = Array((parts[0] + "." + parts[1]).utf8)
    guard let signature = try? key.signature(of: message) else { return }
    let configuration = Benchmark.Configuration(scalingFactor: .one, maxIterations: 10_000)

    Benchmark("AssertionVerify.RawEd25519", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try? key.publicKey.isValidSignature(signature, of: message)) }
    }
    Benchmark("AssertionVerify.IdentityAssertionVerifier", configuration: configuration) { benchmark in
        var index = 0
        for _ in benchmark.scaledIterations {
            blackHole(try? verifier.verify(tokens[index % tokens.count]))
            index += 1
        }
    }
}
