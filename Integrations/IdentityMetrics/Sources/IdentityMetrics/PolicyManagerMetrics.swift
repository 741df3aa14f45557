import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Metrics
import ServiceLifecycle
import Synchronization

/// Counts what one `PolicyManager` decides (``IdentityRuntimeMetrics/observe(_:)``): a swift-service-lifecycle
/// `Service` to run beside the service that uses the manager.
///
/// From its creation, as the manager's `observer` (no need to run it for these):
/// - ``IdentityMetricNames/admissions`` by `tenant`: every admission, once;
/// - ``IdentityMetricNames/admissionRefusals`` by `code` (`AdmissionError.code`: 2 or 3), `cause` (`blocked`,
///   `notInAllowedAccounts`, `claimed`, `denied`, `unavailable`), `block_reason` (the `BlockAccountReason` of a
///   blocked account, `none` otherwise) and `tenant`: every refusal, once;
/// - ``IdentityMetricNames/wipes`` by `outcome` (`complete`, `incomplete`: something was left or failed,
///   `delegate`: the app's delegate wiped) and `tenant`, one per account wiped;
///   ``IdentityMetricNames/wipeDuration`` by `scope` (`account`, `tenant`), one per wipe;
///   ``IdentityMetricNames/wipeLeftovers`` by `tenant`: each `WipeLeftover` of the reports.
///
/// From the manager's `events`, while ``run()`` runs (events sent after the creation are buffered until it
/// starts, the newest 1,024):
/// - ``IdentityMetricNames/accountBlocks`` by `reason` and `tenant`: each `accountBlocked` event (an account
///   becomes blocked, or the reason it reports changes);
/// - ``IdentityMetricNames/accountUnblocks`` by `reason` (the last reason the account was blocked for, as seen
///   here; `unknown` when its block came before the creation and was not reported) and `tenant`;
/// - ``IdentityMetricNames/blockedAccounts``: the accounts blocked now;
/// - ``IdentityMetricNames/policyReloads``: each `policyDidChange` event (a load or reload that changed
///   policies);
/// - ``IdentityMetricNames/policyErrors``: how many documents are in error now (`PolicyManager.policyErrors`);
///   ``IdentityMetricNames/policyErrorReports``: each error newly in the list of a `policyErrorsDidChange`
///   event.
///
/// The gauges start from the manager's state at creation. One manager per ``IdentityRuntimeMetrics`` for the
/// gauges (two managers would set the same ones); the counters add up.
///
/// ```swift
/// let policyMetrics = metrics.observe(policies)
/// try await ServiceGroup(services: [policyMetrics, application], logger: logger).run()
/// ```
public final class PolicyManagerMetrics: Service {
    private let recorder: PolicyMetricsRecorder
    /// The manager's events, subscribed at creation; taken by the one ``run()``.
    private let events: Mutex<AsyncStream<PolicyEvent>?>

    init(manager: PolicyManager, metrics: IdentityRuntimeMetrics) {
        recorder = PolicyMetricsRecorder(manager: manager, metrics: metrics)
        events = Mutex(manager.events)
        manager.observer = recorder
        recorder.start(blocked: manager.blockedAccounts.map { ($0, manager.blockReason(for: $0)) }, errors: manager.policyErrors)
    }

    /// Counts the manager's events until the task is cancelled or a graceful shutdown begins. Runs once: a
    /// second call returns at once.
    public func run() async {
        guard let events = events.withLock({ $0.take() }) else { return }
        for await event in events.cancelOnGracefulShutdown() {
            recorder.record(event)
        }
    }
}

/// The manager's observer, and what the events update. Holds the manager weakly (the manager holds it).
final class PolicyMetricsRecorder: PolicyManagerObserver {
    private weak let manager: PolicyManager?
    private let metrics: IdentityRuntimeMetrics
    /// Per block account: the reason last reported; and the policy errors last reported.
    private let state = Mutex<(blocked: [Identity: BlockAccountReason], errors: Set<PolicyDocumentError>)>(([:], []))

    init(manager: PolicyManager, metrics: IdentityRuntimeMetrics) {
        self.manager = manager
        self.metrics = metrics
    }

    /// The manager's state at creation: who is blocked and for what, and the errors already reported.
    func start(blocked: [(Identity, BlockAccountReason)], errors: [PolicyDocumentError]) {
        let count = state.withLock { state in
            for (account, reason) in blocked where reason != .notBlocked { state.blocked[account] = reason }
            state.errors = Set(errors)
            return state.blocked.count
        }
        metrics.blockedAccounts.record(count)
        metrics.policyErrors.record(errors.count)
    }

    private func tenant(of account: Identity) -> [String] {
        metrics.tenantValues(manager?.tenant(for: account) ?? TenantID.domain(of: account) ?? TenantID(TenantLabels.none))
    }

    // MARK: The observer

    func didAdmit(_ account: Identity, reason: AdmissionReason) {
        metrics.admissions(tenant(of: account)).increment()
    }

    func didRefuseAdmission(_ error: AdmissionError, reason: AdmissionReason) {
        let (cause, blockReason): (String, String) = switch error.cause {
        case let .blocked(reason): ("blocked", reason.description)
        case .notInAllowedAccounts: ("notInAllowedAccounts", "none")
        case .claimed: ("claimed", "none")
        case .denied: ("denied", "none")
        case .unavailable: ("unavailable", "none")
        }
        metrics.admissionRefusals([String(error.code), cause, blockReason] + tenant(of: error.account)).increment()
    }

    func didWipe(_ reports: [WipeReport], tenant: TenantID?, unreadable: [WipeLeftover], duration: Duration) {
        metrics.wipeDuration([tenant == nil ? "account" : "tenant"]).record(duration: duration)
        for report in reports {
            let outcome = report.handledByDelegate ? "delegate" : report.isComplete ? "complete" : "incomplete"
            let values = self.tenant(of: report.account)
            metrics.wipes([outcome] + values).increment()
            if !report.leftovers.isEmpty { metrics.wipeLeftovers(values).increment(by: Int64(report.leftovers.count)) }
        }
        if let tenant, !unreadable.isEmpty {
            metrics.wipeLeftovers(metrics.tenantValues(tenant)).increment(by: Int64(unreadable.count))
        }
    }

    // MARK: Events

    func record(_ event: PolicyEvent) {
        switch event {
        case let .accountBlocked(account, reason):
            let count = state.withLock { state in
                state.blocked[account] = reason
                return state.blocked.count
            }
            metrics.accountBlocks([reason.description] + tenant(of: account)).increment()
            metrics.blockedAccounts.record(count)
        case let .accountUnblocked(account):
            let (reason, count) = state.withLock { state in
                (state.blocked.removeValue(forKey: account), state.blocked.count)
            }
            metrics.accountUnblocks([reason?.description ?? "unknown"] + tenant(of: account)).increment()
            metrics.blockedAccounts.record(count)
        case .policyDidChange:
            metrics.policyReloads.increment()
        case let .policyErrorsDidChange(errors):
            let fresh = state.withLock { state in
                let fresh = errors.filter { !state.errors.contains($0) }.count
                state.errors = Set(errors)
                return fresh
            }
            metrics.policyErrors.record(errors.count)
            if fresh > 0 { metrics.policyErrorReports.increment(by: Int64(fresh)) }
        case .accountPoliciesDidChange, .accountManaged, .accountUnmanaged, .wipeDidComplete, .uiIdentityDidChange,
             .primaryUserDidChange, .allowedAccountsDidChange, .enrollmentStatus, .restartRequired:
            break
        }
    }
}
