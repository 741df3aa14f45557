import CoreMetrics
import Dispatch
import IdentityAssertions
import IdentityMetrics
import IdentityPolicy
import IdentityRuntime
import Metrics
import Synchronization

/// `identity-metrics-bench`: what IdentityMetrics adds to each event it counts, with a backend bootstrapped.
///
/// Two events, the two a service meets at every request:
/// - `admission`: `PolicyManager.withAdmittedIdentity` of a registered managed account (no admission checks);
///   metered, the manager's observer is ``IdentityRuntimeMetrics/observe(_:)``'s recorder (one counter by tenant);
/// - `verification`: a reusable verifier's answer for a token it verified before; metered, its observer is
///   ``IdentityRuntimeMetrics/verificationObserver`` (two counters: accepted, and cache hits).
///
/// Each against the same event with no observer (`plain`). The backend is a minimal one bootstrapped into
/// `MetricsSystem`: each counter an atomic integer, the cheapest a real backend can be, so the figures are what
/// IdentityMetrics itself costs (label lookup, tenant dimension, swift-metrics' dispatch).
///
/// - no arguments: wall clock, `--rounds R` (default 7) rounds of `--count N` events (default 50,000) of each
///   side, interleaved; prints the median ns per event of each side and their difference.
/// - `--what admission|verification --side plain|metered --count N`: a warm-up, then `N` events of one side and
///   nothing else, for callgrind (a run with `--count 0` is the baseline to subtract). The entry point is
///   synchronous (it waits for a task): valgrind 3.19 stops at the thread exit of Swift's asynchronous main.
let arguments = CommandLine.arguments.dropFirst()
func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), arguments.index(after: index) < arguments.endIndex else { return nil }
    return arguments[arguments.index(after: index)]
}
let count = option("--count").flatMap(Int.init) ?? 50_000
let rounds = max(1, option("--rounds").flatMap(Int.init) ?? 7)

/// Counters as atomic integers; recorders, meters and timers that keep nothing.
final class AtomicCounters: MetricsFactory {
    final class Handler: CounterHandler, FloatingPointCounterHandler, RecorderHandler, MeterHandler, TimerHandler {
        let value = Atomic<Int64>(0)
        func increment(by amount: Int64) { value.add(amount, ordering: .relaxed) }
        func increment(by amount: Double) { value.add(Int64(amount), ordering: .relaxed) }
        func reset() { value.store(0, ordering: .relaxed) }
        func record(_ value: Int64) { self.value.store(value, ordering: .relaxed) }
        func record(_ value: Double) { self.value.store(Int64(value), ordering: .relaxed) }
        func set(_ value: Int64) { self.value.store(value, ordering: .relaxed) }
        func set(_ value: Double) { self.value.store(Int64(value), ordering: .relaxed) }
        func decrement(by amount: Double) { value.subtract(Int64(amount), ordering: .relaxed) }
        func recordNanoseconds(_ duration: Int64) { value.store(duration, ordering: .relaxed) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Handler() }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler { Handler() }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { Handler() }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { Handler() }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Handler() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

/// One side's admission and verification, ready to run.
struct Side: Sendable {
    let policies: PolicyManager
    let verifier: IdentityAssertionVerifier
    let token: String
    let account: Identity

    init(metered metrics: IdentityRuntimeMetrics?, key: AssertionSigningKey, token: String, account: Identity) {
        policies = PolicyManager(policySource: StaticPolicySource(tenants: [
            "contoso.com": Policy(identity: nil, isFileEncryptionRequired: true),
        ]))
        policies.registerAccount(account)
        verifier = IdentityAssertionVerifier(
            keys: ["k1": key.publicKey], issuers: ["frontend"], audience: "documents", mode: .reusable,
            observer: metrics?.verificationObserver)
        if let metrics { _ = metrics.observe(policies) }
        self.token = token
        self.account = account
    }

    func admissions(_ count: Int) async {
        for _ in 0..<count {
            do { try await policies.withAdmittedIdentity(account) {} } catch {
                fatalError("the managed account was not admitted: \(error)")
            }
        }
    }

    func verifications(_ count: Int) {
        for _ in 0..<count {
            guard (try? verifier.verify(token)) != nil else { fatalError("the reusable token was refused") }
        }
    }
}

func nanosecondsPerEvent(_ count: Int, _ body: () async -> Void) async -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    await body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(max(1, count))
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func run() async throws {
    let account: Identity = "alice@contoso.com"
    let key = try AssertionSigningKey()
    let token = try IdentityAssertionSigner(key: key, keyID: "k1", issuer: "frontend")
        .sign(account: account, tenant: nil, audience: "documents", lifetime: 3_600)
    let what = option("--what")
    let onlySide = option("--side")
    precondition(what == nil || what == "admission" || what == "verification", "--what is admission or verification")
    precondition(onlySide == nil || onlySide == "plain" || onlySide == "metered", "--side is plain or metered")
    if onlySide != "plain" { MetricsSystem.bootstrap(AtomicCounters()) }
    let plain = Side(metered: nil, key: key, token: token, account: account)
    let metered = Side(metered: IdentityRuntimeMetrics(), key: key, token: token, account: account)
    for side in [plain, metered] {
        await side.admissions(1_000)
        side.verifications(1_000)
    }
    if let what, let onlySide {
        let side = onlySide == "plain" ? plain : metered
        if what == "admission" { await side.admissions(count) } else { side.verifications(count) }
        return
    }
    var table: [String: [Double]] = [:]
    for round in 0..<rounds {
        for side in round.isMultiple(of: 2) ? [("plain", plain), ("metered", metered)] : [("metered", metered), ("plain", plain)] {
            table["admission \(side.0)", default: []].append(await nanosecondsPerEvent(count) { await side.1.admissions(count) })
            table["verification \(side.0)", default: []].append(await nanosecondsPerEvent(count) { side.1.verifications(count) })
        }
    }
    print("IdentityMetrics per event, \(rounds) rounds of \(count) events (median ns per event)")
    for event in ["admission", "verification"] {
        let without = median(table["\(event) plain"]!)
        let with = median(table["\(event) metered"]!)
        print("  \(event): no observer \(Int(without)) ns, metered \(Int(with)) ns, +\(Int(with - without)) ns")
    }
}

// A synchronous entry point that waits for the task (see above).
nonisolated(unsafe) var failure: (any Error)?
let finished = DispatchSemaphore(value: 0)
Task.detached {
    do { try await run() } catch { failure = error }
    finished.signal()
}
finished.wait()
if let failure { fatalError("identity-metrics-bench: \(failure)") }
