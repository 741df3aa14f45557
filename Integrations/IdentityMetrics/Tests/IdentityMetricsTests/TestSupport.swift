import Foundation
import IdentityMetrics
import IdentityPolicy
import IdentityRuntime
import MetricsTestKit
import Testing

let alice: Identity = "alice@contoso.com"
let bob: Identity = "bob@contoso.com"
let carol: Identity = "carol@fabrikam.com"
/// An account without a domain: its tenant (`svc-backup@`) holds its name.
let serviceAccount: Identity = "svc-backup"
let accounts = [alice, bob, carol, serviceAccount]

/// A manager with a policy for contoso.com and fabrikam.com (alice, bob, carol managed), every account
/// registered; `check` decides admissions.
func makeManager(check: (@Sendable (Identity) -> AdmissionOutcome)? = nil) -> PolicyManager {
    let policy = Policy(identity: nil, isFileEncryptionRequired: false)
    let manager = PolicyManager(policySource: StaticPolicySource(
        [serviceAccount: policy], tenants: ["contoso.com": policy, "fabrikam.com": policy]))
    for account in accounts { manager.registerAccount(account) }
    if let check { manager.registerAdmissionCheck(ClosureAdmissionCheck { account, _ in check(account) }) }
    return manager
}

/// Metrics into a fresh `TestMetrics`.
func makeMetrics(_ tenantDimension: IdentityRuntimeMetrics.TenantDimension = .default) -> (TestMetrics, IdentityRuntimeMetrics) {
    let factory = TestMetrics()
    return (factory, IdentityRuntimeMetrics(configuration: .init(tenantDimension: tenantDimension), factory: factory))
}

extension TestMetrics {
    /// The total of the counter `label` with exactly `dimensions` (0 when it was never made).
    func total(_ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        (try? expectCounter(label, dimensions))?.totalValue ?? 0
    }

    /// Every dimension of every metric made, as `label key=value`.
    var allDimensions: [String] {
        let counters = counters.flatMap { counter in counter.dimensions.map { "\(counter.label) \($0.0)=\($0.1)" } }
        let timers = timers.flatMap { timer in timer.dimensions.map { "\(timer.label) \($0.0)=\($0.1)" } }
        let recorders = recorders.flatMap { recorder in recorder.dimensions.map { "\(recorder.label) \($0.0)=\($0.1)" } }
        return counters + timers + recorders
    }

    /// Expects that no dimension value contains any of `secrets` (account names, tokens), case-insensitively.
    func expectNoDimension(containing secrets: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        for value in allDimensions {
            for secret in secrets where !secret.isEmpty {
                #expect(!value.lowercased().contains(secret.lowercased()), "\(value) holds \(secret)", sourceLocation: sourceLocation)
            }
        }
    }
}

/// Waits (up to 5 s) until `condition` holds.
func eventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(5)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}

/// Runs `service` in a task for the duration of `body`.
func whileRunning<T>(_ service: PolicyManagerMetrics, _ body: () async throws -> T) async rethrows -> T {
    let task = Task { await service.run() }
    defer { task.cancel() }
    return try await body()
}
