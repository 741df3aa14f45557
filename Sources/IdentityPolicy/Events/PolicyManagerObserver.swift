import IdentityProtection
import IdentityRuntime

/// Sees the decisions of a ``PolicyManager`` that its ``PolicyManager/events`` do not carry: the outcome of
/// every admission, and the reports and duration of every selective wipe. For metrics and audit trails
/// (Integrations/IdentityMetrics installs one); install it with ``PolicyManager/observer``.
///
/// - The manager calls it exactly once per decision: once per call of
///   ``PolicyManager/withAdmittedIdentity(_:reason:isolation:operation:)`` (either form), once per wipe
///   (``PolicyManager/wipeData(forAccount:)``, ``PolicyManager/wipeData(forTenant:)``).
/// - It calls it synchronously, on the thread or task that decided, never while it holds its lock: an observer
///   may call the manager (``PolicyManager/tenant(for:)``, for example).
/// - An admission is reported before its operation runs; a refusal before the caller gets its error.
/// - A wipe is reported after its last step (after ``PolicyEvent/wipeDidComplete(account:)`` was posted for
///   each account), before `wipeData` returns.
///
/// Keep it quick and never block in it: it runs on the request's path. Every method has an empty default, so
/// an observer implements what it needs.
///
/// ```swift
/// struct RefusalLog: PolicyManagerObserver {
///     func didRefuseAdmission(_ error: AdmissionError, reason: AdmissionReason) {
///         print("refused: code \(error.code), \(error.cause)")
///     }
/// }
/// PolicyManager.shared.observer = RefusalLog()
/// ```
///
/// > Note: A manager without an observer pays nothing for this: admission reads the observer in the critical
/// > section it takes anyway, and a wipe reads no clock for it.
public protocol PolicyManagerObserver: Sendable {
    /// `account` was admitted for `reason`: the operation runs next, under `account`.
    func didAdmit(_ account: Identity, reason: AdmissionReason)

    /// An admission was refused: `error` is what the caller gets (its ``AdmissionError/account``,
    /// ``AdmissionError/code`` and ``AdmissionError/cause``). The operation does not run.
    func didRefuseAdmission(_ error: AdmissionError, reason: AdmissionReason)

    /// A selective wipe ended.
    ///
    /// - Parameters:
    ///   - reports: one per account wiped, as `wipeData` returns them (sorted by account for a tenant).
    ///   - tenant: the tenant of ``PolicyManager/wipeData(forTenant:)``; `nil` for
    ///     ``PolicyManager/wipeData(forAccount:)``.
    ///   - unreadable: what the search for a tenant's accounts could not look into
    ///     (``TenantWipeReport/leftovers``); empty for the wipe of one account.
    ///   - duration: from the call of `wipeData` to its reports.
    func didWipe(_ reports: [WipeReport], tenant: TenantID?, unreadable: [WipeLeftover], duration: Duration)
}

extension PolicyManagerObserver {
    public func didAdmit(_ account: Identity, reason: AdmissionReason) {}

    public func didRefuseAdmission(_ error: AdmissionError, reason: AdmissionReason) {}

    public func didWipe(_ reports: [WipeReport], tenant: TenantID?, unreadable: [WipeLeftover], duration: Duration) {}
}

extension PolicyManager {
    /// What sees this manager's admissions and wipes (``PolicyManagerObserver``); `nil`, the default, for
    /// nothing. One observer per manager: setting one replaces the one before. Held strongly.
    public var observer: (any PolicyManagerObserver)? {
        get { state.withLock { $0.observer } }
        set { state.withLock { $0.observer = newValue } }
    }
}
