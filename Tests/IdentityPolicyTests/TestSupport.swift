import Dispatch
import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

let alice: Identity = "alice@contoso.com"
let bob: Identity = "bob@contoso.com"
let carol: Identity = "carol@fabrikam.com"
let dave: Identity = "dave@gmail.com"

/// A thread-safe list of values, for recording from completion handlers.
final class Recorder<Value: Sendable>: Sendable {
    private let values = LockedValue<[Value]>([])

    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
}

/// A check that admits once the test opens its gate.
struct GatedAdmissionCheck: AdmissionCheck {
    let gate: Gate
    let runs: Recorder<Identity>

    func evaluate(account: Identity, reason: AdmissionReason) async -> AdmissionOutcome {
        runs.append(account)
        await gate.wait()
        return .admit
    }
}

/// A gate checks wait on until the test opens it.
final class Gate: Sendable {
    private let state = LockedValue<(open: Bool, entered: Int, waiters: [CheckedContinuation<Void, Never>])>((false, 0, []))

    /// Suspends until ``open()``; returns at once when open already.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                state.entered += 1
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    var entered: Int { state.withLock { $0.entered } }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Polls `condition` every millisecond until it holds or `seconds` of budget are spent. The budget detects a
/// hang; it is not a speed claim, so it is generous: a slow or loaded machine must not fail a test that would
/// pass.
///
/// A poll whose millisecond sleep took far longer means this task was starved (every test of the process
/// runs at once on the cooperative pool; under ThreadSanitizer on a busy machine a whole run has stalled for
/// minutes): the work being waited for was starved with it, so such a poll spends at most 100 ms of the
/// budget, however long it took. A real hang still ends: every poll spends something. The default, 30 s, fails
/// a broken test in under a minute on an idle machine; a test that waits longer passes `within:`.
func eventually(within seconds: Double = 30, _ condition: @Sendable () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    var budget = Duration.seconds(seconds)
    var last = clock.now
    while budget > .zero {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
        let now = clock.now
        budget -= min(now - last, .milliseconds(100))
        last = now
    }
    return condition()
}

/// A check that records the identity and window it saw, then answers `outcome` (after the gate, if any).
struct RecordingCheck: ConditionalLaunchCheck {
    let name: String
    let outcome: ConditionalLaunchOutcome
    let log: Recorder<String>
    var gate: Gate?

    func evaluate(identity: Identity, window: WindowID) async -> ConditionalLaunchOutcome {
        log.append("\(name):\(identity.name):\(window.rawValue):\(IdentityContext.currentThreadIdentity?.name ?? "nil")")
        if let gate { await gate.wait() }
        return outcome
    }
}

extension RuntimeSettings {
    /// The SDK guide's original model: one managed account, the primary user.
    static var singleManagedAccount: RuntimeSettings {
        var settings = RuntimeSettings()
        settings.maxManagedAccounts = 1
        return settings
    }
}

/// A manager whose primary user is alice, with the given checks.
func makeManager(
    checks: [any ConditionalLaunchCheck] = [], settings: RuntimeSettings = RuntimeSettings(),
    policySource: (any PolicySource)? = nil
) -> PolicyManager {
    let manager = PolicyManager(settings: settings, policySource: policySource)
    manager.setPrimaryUser(alice)
    manager.conditionalLaunchChecks = checks
    return manager
}

/// Calls the completion-handler form and waits for its (first) result.
func switchUI(_ manager: PolicyManager, _ identity: Identity?, window: WindowID? = nil) async -> SwitchIdentityResult {
    await withCheckedContinuation { continuation in
        manager.setUIPolicyIdentity(identity, for: window) { continuation.resume(returning: $0) }
    }
}

/// A policy delegate made of closures.
final class ClosureDelegate: PolicyDelegate {
    typealias Switch = @Sendable (Identity, IdentitySwitchReason, WindowID, @escaping @Sendable (SwitchIdentityResult) -> Void) -> Void
    let onSwitch: Switch
    let onAdd: (@Sendable (Identity, @escaping @Sendable (AddIdentityResult) -> Void) -> Void)?
    let onWipe: (@Sendable (Identity) -> Bool)?
    let onRestart: (@Sendable () -> Bool)?

    init(
        onSwitch: @escaping Switch = { _, _, _, answer in answer(.success) },
        onAdd: (@Sendable (Identity, @escaping @Sendable (AddIdentityResult) -> Void) -> Void)? = nil,
        onWipe: (@Sendable (Identity) -> Bool)? = nil,
        onRestart: (@Sendable () -> Bool)? = nil
    ) {
        self.onSwitch = onSwitch
        self.onAdd = onAdd
        self.onWipe = onWipe
        self.onRestart = onRestart
    }

    func identitySwitchRequired(
        _ identity: Identity, reason: IdentitySwitchReason, window: WindowID,
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void
    ) {
        onSwitch(identity, reason, window, completionHandler)
    }

    func addIdentity(_ identity: Identity, completionHandler: @escaping @Sendable (AddIdentityResult) -> Void) {
        if let onAdd { onAdd(identity, completionHandler) } else { completionHandler(.failed) }
    }

    func wipeData(forAccount account: Identity) -> Bool {
        onWipe?(account) ?? false
    }

    func restartApplication() -> Bool {
        onRestart?() ?? false
    }
}

/// A fresh temporary directory, removed on deinit.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("idpolicy-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func write(_ name: String, _ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: file(name)))
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Captures the `completionCalledMoreThanOnce` issues whose operation mentions `marker`, reported anywhere
/// in the process while `body` runs (parallel suites use other markers); `body` sees them as they come.
/// Captured issues are expected: they are not printed.
func collectIssues(marker: String, _ body: (Recorder<RuntimeIssue>) async throws -> Void) async rethrows -> [RuntimeIssue] {
    let issues = Recorder<RuntimeIssue>()
    _ = try await IdentityStrictMode.capturingIssues(matching: { issue in
        guard case let .completionCalledMoreThanOnce(operation) = issue, operation.contains(marker) else { return false }
        issues.append(issue)
        return true
    }) {
        try await body(issues)
    }
    return issues.all
}
