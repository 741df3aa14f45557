import Foundation
import IdentityRuntime

/// Registers and enrolls accounts (the analog of `IntuneMAMEnrollmentManager`). Any number of accounts are
/// enrolled (managed) at once, up to ``RuntimeSettings/maxManagedAccounts``; the first enrolled is the
/// ``PolicyManager/primaryUser``. Status codes, retries and policy check-ins are per account.
///
/// ```swift
/// let enrollment = EnrollmentManager(policyManager: .shared, service: LocalEnrollmentService(policySource: source))
/// enrollment.delegate = self
/// let status = await enrollment.registerAndEnrollAccount("alice@contoso.com")   // .newPoliciesReceived
/// ```
///
/// ## Transitions
/// | account state | operation | outcome |
/// |---|---|---|
/// | any | enroll `""` | 207 `nilAccount` |
/// | not in ``allowedAccounts`` | enroll | 209 `notEmmAccount`, not registered |
/// | enrolled | enroll again | 208 `alreadyEnrolled` |
/// | ``RuntimeSettings/maxManagedAccounts`` accounts enrolled | enroll another | 227 `singleManagedAccountMode`, not registered |
/// | registered | enroll, service 1xx | enrolled (managed; the primary user if it is the first), its own check-ins every ``RuntimeSettings/policyRefreshInterval`` |
/// | registered | enroll, retryable 2xx | stays registered, retried every ``RuntimeSettings/enrollmentRetryInterval`` |
/// | registered | enroll, 209/210/211 | deregistered, no retry |
/// | registered | enroll, other 2xx | stays registered, no retry |
/// | enrolled | check-in 102 `wipeReceived` | wiped and unenrolled |
/// | registered or enrolled | deregister | 104 `unenrollmentSuccess`, optional wipe |
/// | neither | deregister | 214 `notEnrolledAccount` |
///
/// Every operation reports to the ``delegate`` and as a ``PolicyEvent/enrollmentStatus(_:)`` event.
public final class EnrollmentManager: Sendable {
    /// The manager whose accounts this one registers, enrolls and wipes.
    public let policyManager: PolicyManager
    /// The enrollment service every operation asks.
    public let service: any EnrollmentService
    /// When retries and check-ins run.
    public let scheduler: any EnrollmentScheduler

    private struct State {
        var registered: [Identity] = []
        /// In enrollment order.
        var enrolled: [Identity] = []
        var retries: [Identity: Scheduled] = [:]
        var refreshes: [Identity: Scheduled] = [:]
        var nextScheduleID: UInt64 = 0
        /// The accounts whose retry or check-in the end of ``run()`` called off: the next ``run()`` schedules
        /// them again.
        var suspendedRetries: Set<Identity> = []
        var suspendedRefreshes: Set<Identity> = []
        var delegate: (any EnrollmentDelegate)?

        mutating func scheduleID() -> UInt64 {
            nextScheduleID &+= 1
            return nextScheduleID
        }
    }

    /// A retry or check-in the scheduler holds. Its work runs only while it is still the account's entry: one
    /// that was called off (or replaced) and fires anyway (a dispatch item already running) does nothing.
    private struct Scheduled {
        let id: UInt64
        let work: any ScheduledWork
        func cancel() { work.cancel() }
    }

    private let state: LockedValue<State>
    /// The retries and check-ins the scheduler started, while they run: ended with ``run()``.
    private let backgroundWork = BackgroundWork()

    /// An enrollment manager for `policyManager`, asking `service` and timing retries with `scheduler`.
    public init(
        policyManager: PolicyManager, service: any EnrollmentService,
        scheduler: any EnrollmentScheduler = DispatchEnrollmentScheduler()
    ) {
        self.policyManager = policyManager
        self.service = service
        self.scheduler = scheduler
        state = LockedValue(State())
    }

    deinit {
        state.withLock { state in
            state.refreshes.values.forEach { $0.cancel() }
            state.retries.values.forEach { $0.cancel() }
        }
    }

    /// Told the outcome of every operation. Held strongly.
    public var delegate: (any EnrollmentDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// The accounts registered (enrolled or waiting for a retry), in registration order.
    public var registeredAccounts: [Identity] {
        state.withLock { $0.registered }
    }

    /// The first account this manager enrolled that is still enrolled (the primary user, when the app does
    /// not set one itself).
    public var enrolledAccount: Identity? {
        state.withLock { $0.enrolled.first }
    }

    /// Every account this manager enrolled, in enrollment order.
    public var enrolledAccounts: [Identity] {
        state.withLock { $0.enrolled }
    }

    /// The only accounts that may enroll (`nil`: any): the policy manager's
    /// ``PolicyManager/allowedAccounts`` (``RuntimeSettings/allowedAccounts``), which also refuses switches to
    /// other accounts. A change posts `.allowedAccountsDidChange`.
    public var allowedAccounts: [Identity]? {
        get { policyManager.allowedAccounts }
        set { policyManager.allowedAccounts = newValue }
    }

    /// With ``RuntimeSettings/autoEnrollOnLaunch``, asks the policy delegate to add the first allowed account
    /// (``PolicyManager/addIdentity(_:)``) and enrolls it when the delegate succeeds.
    /// - Returns: the enrollment status, or `nil` when nothing was attempted.
    @discardableResult
    public func start() async -> EnrollmentStatus? {
        guard policyManager.settings.autoEnrollOnLaunch, let account = allowedAccounts?.first, enrolledAccount == nil else {
            return nil
        }
        guard await policyManager.addIdentity(account) == .success else {
            return report(EnrollmentStatus(identity: account, statusCode: .loginCanceled, errorString: "the delegate did not add the account"), .enrollment)
        }
        return await registerAndEnrollAccount(account)
    }

    /// Registers `account` and enrolls it. See the transition table.
    ///
    /// - Parameters:
    ///   - account: the account to register and enroll.
    ///   - tenantID: the account's tenant, when known (recorded with ``PolicyManager/registerAccount(_:tenantID:objectID:)``;
    ///     otherwise its tenant is the domain of its name).
    ///   - objectID: the account's directory object ID, when known.
    ///
    /// The tenant and object ID are recorded before the service is asked and kept while the account stays
    /// registered (enrolled, or waiting for a retry); when the service's answer deregisters it (such as
    /// ``EnrollmentStatusCode/notEmmAccount``), the registration it had before is put back, unless someone
    /// registered the account again meanwhile.
    @discardableResult
    public func registerAndEnrollAccount(
        _ account: Identity, tenantID: TenantID? = nil, objectID: String? = nil
    ) async -> EnrollmentStatus {
        enum Gate { case refuse(EnrollmentStatusCode, String), proceed }
        let allowed = policyManager.allowedAccounts
        let limit = policyManager.settings.maxManagedAccounts
        let managed = policyManager.enrolledAccounts
        let gate = state.withLock { state -> Gate in
            if account.isUnmanaged { return .refuse(.nilAccount, "no account given") }
            if let allowed, !allowed.contains(account) {
                return .refuse(.notEmmAccount, "\(account.name) is not an allowed account")
            }
            if state.enrolled.contains(account) { return .refuse(.alreadyEnrolled, "\(account.name) is enrolled already") }
            let counted = Self.managedAccounts(state.enrolled, managed)
            if let limit, counted.count >= limit {
                return .refuse(.singleManagedAccountMode, Self.limitMessage(limit, enrolled: counted))
            }
            if !state.registered.contains(account) { state.registered.append(account) }
            state.retries.removeValue(forKey: account)?.cancel()
            return .proceed
        }
        if case let .refuse(code, message) = gate {
            return report(EnrollmentStatus(identity: account, statusCode: code, errorString: message), .enrollment)
        }
        // The tenant and object ID given count while the account stays registered: an enrollment the service
        // refuses (the account deregistered) puts back what was registered before, as if it never ran.
        var registration: (previous: AccountInfo?, current: AccountInfo)?
        if tenantID != nil || objectID != nil {
            let previous = policyManager.accountInfo(for: account)
            policyManager.registerAccount(account, tenantID: tenantID, objectID: objectID)
            registration = (previous, AccountInfo(identity: account, tenantID: tenantID, objectID: objectID))
        }
        updateClaims()
        let response = await service.enroll(account)
        var code = response.statusCode
        var message = response.message
        let retryInterval = policyManager.settings.enrollmentRetryInterval
        let refreshInterval = policyManager.settings.policyRefreshInterval
        let managedNow = policyManager.enrolledAccounts
        /// Records the service's answer in `state`; whether the account is enrolled now.
        func decide(_ state: inout State) -> Bool {
            guard state.registered.contains(account) else {
                code = .reEnrollForUnenrolledUser
                message = "\(account.name) was deregistered while enrolling"
                return false
            }
            if code.isSuccess {
                let counted = Self.managedAccounts(state.enrolled, managedNow)
                if let limit, counted.count >= limit, !counted.contains(account) {
                    code = .singleManagedAccountMode
                    message = Self.limitMessage(limit, enrolled: counted) + " (enrolled meanwhile)"
                    state.registered.removeAll { $0 == account }
                    return false
                }
                if !state.enrolled.contains(account) { state.enrolled.append(account) }
                state.refreshes.removeValue(forKey: account)?.cancel()
                state.refreshes[account] = scheduleRefresh(of: account, after: refreshInterval, in: &state)
                return true
            }
            if code.requiresAccountRemoval {
                state.registered.removeAll { $0 == account }
            } else if code.isRetryable {
                state.retries[account] = scheduleRetry(of: account, after: retryInterval, in: &state)
            }
            return false
        }
        let (enrolled, deregistered) = state.withLock { state -> (Bool, Bool) in
            let enrolled = decide(&state)
            return (enrolled, !state.registered.contains(account))
        }
        if deregistered, let registration {
            policyManager.restoreRegistration(of: account, to: registration.previous, ifStill: registration.current)
        }
        if enrolled, code == .wipeReceived {
            // The service wants the account wiped: it stays (or becomes) blocked from now, not only from when
            // the wipe below starts, after the service heard of the unenrolment.
            policyManager.blockAccount(account, reason: .wiped)
        } else if enrolled {
            // A new enrollment starts the account afresh after a wipe.
            policyManager.unblockAccount(account, reason: .wiped)
            policyManager.setEnrolled(account, true)
        }
        updateClaims()
        let status = report(EnrollmentStatus(identity: account, statusCode: code, errorString: message), .enrollment)
        if enrolled, code == .wipeReceived {
            // The unenrolment reports its own status (a wipe that did not finish as failedToClearMamData)
            // to the delegate; this call answers for the policy refresh.
            _ = await deRegisterAndUnenrollAccount(account, withWipe: true)
        }
        return status
    }

    private func retry(_ account: Identity, id: UInt64) async {
        let due = state.withLock { state -> Bool in
            guard state.retries[account]?.id == id else { return false }
            state.retries.removeValue(forKey: account)
            return state.registered.contains(account) && !state.enrolled.contains(account)
        }
        if due { await registerAndEnrollAccount(account) }
    }

    /// The accounts that count against ``RuntimeSettings/maxManagedAccounts``: those this manager enrolled (read
    /// under its lock, so concurrent enrollments see each other) and those the policy manager has enrolled
    /// otherwise (``PolicyManager/setPrimaryUser(_:)``).
    private static func managedAccounts(_ own: [Identity], _ policyManagers: [Identity]) -> [Identity] {
        own + policyManagers.filter { !own.contains($0) }
    }

    private static func limitMessage(_ limit: Int, enrolled: [Identity]) -> String {
        let names = enrolled.map(\.name).joined(separator: ", ")
        return "at most \(limit) managed account\(limit == 1 ? "" : "s") (maxManagedAccounts); enrolled: \(names); unenroll one first"
    }

    /// Checks in for the first enrolled account's policy now; see ``refreshPolicy(for:)``.
    @discardableResult
    public func refreshPolicy() async -> EnrollmentStatus? {
        guard let account = enrolledAccount else { return nil }
        return await refreshPolicy(for: account)
    }

    /// Checks in for `account`'s policy now (it also happens every ``RuntimeSettings/policyRefreshInterval``
    /// for each enrolled account). 100 posts `.policyDidChange`; 102 wipes and unenrolls the account.
    /// - Returns: `nil` when `account` is not enrolled through this manager.
    @discardableResult
    public func refreshPolicy(for account: Identity) async -> EnrollmentStatus? {
        guard state.withLock({ $0.enrolled.contains(account) }) else { return nil }
        let response = await service.checkIn(account)
        let interval = policyManager.settings.policyRefreshInterval
        state.withLock { state in
            guard state.enrolled.contains(account) else { return }
            state.refreshes.removeValue(forKey: account)?.cancel()
            state.refreshes[account] = scheduleRefresh(of: account, after: interval, in: &state)
        }
        let status = report(EnrollmentStatus(identity: account, statusCode: response.statusCode, errorString: response.message), .policy)
        switch response.statusCode {
        case .newPoliciesReceived:
            policyManager.broadcaster.send(.policyDidChange, object: policyManager, userInfo: ["accounts": [account.name], "tenants": [String]()])
            policyManager.send(.accountPoliciesDidChange(accounts: [account], tenants: []))
        case .wipeReceived, .policyRecordGone: _ = await deRegisterAndUnenrollAccount(account, withWipe: response.statusCode == .wipeReceived)
        default: break
        }
        return status
    }

    /// Unenrolls and deregisters `account`; with `withWipe`, runs the selective wipe
    /// (``PolicyManager/wipeData(forAccount:)``) afterwards. A wipe that did not finish (its report carries an
    /// error: data it was asked to remove may remain) answers ``EnrollmentStatusCode/failedToClearMamData``
    /// (215), never ``EnrollmentStatusCode/unenrollmentSuccess``.
    @discardableResult
    public func deRegisterAndUnenrollAccount(_ account: Identity, withWipe: Bool) async -> EnrollmentStatus {
        let wasEnrolled = state.withLock { state -> Bool? in
            guard state.registered.contains(account) || state.enrolled.contains(account) else { return nil }
            state.retries.removeValue(forKey: account)?.cancel()
            return state.enrolled.contains(account)
        }
        guard let wasEnrolled else {
            return report(EnrollmentStatus(identity: account, statusCode: .notEnrolledAccount, errorString: "\(account.name) is not registered"), .unenroll)
        }
        // An account about to be wiped is refused from now: nothing is admitted or created for it while the
        // service hears of the unenrolment (the wipe itself blocks it too, when it starts).
        if withWipe { policyManager.blockAccount(account, reason: .wiped) }
        var message: String?
        if wasEnrolled {
            let response = await service.unenroll(account)
            if !response.statusCode.isSuccess { message = "service answered \(response.statusCode.rawValue); unenrolled locally" }
        }
        state.withLock { state in
            state.registered.removeAll { $0 == account }
            state.enrolled.removeAll { $0 == account }
            state.refreshes.removeValue(forKey: account)?.cancel()
        }
        if wasEnrolled { policyManager.setEnrolled(account, false) }
        updateClaims()
        if withWipe, let failure = await policyManager.wipeData(forAccount: account).error {
            // Unenrolled, but data the wipe was asked to remove may remain: never reported as a success.
            return report(EnrollmentStatus(
                identity: account, statusCode: .failedToClearMamData,
                errorString: "unenrolled; the wipe did not finish: \(failure)"), .unenroll)
        }
        return report(EnrollmentStatus(identity: account, statusCode: .unenrollmentSuccess, errorString: message), .unenroll)
    }

    // MARK: Background work

    /// The manager's background work, for the service or app that owns it. Retries and check-ins are timed by
    /// the ``scheduler`` and run as tasks this manager keeps. This waits until the calling task is cancelled;
    /// then it calls off every retry and check-in still scheduled, waits until those already running have
    /// ended (a check-in or enrollment in flight is not interrupted: it ends as its service call does), and
    /// returns. The next `run()` schedules the called-off retries and check-ins again, one interval from its
    /// start (an account unenrolled or deregistered meanwhile excepted); operations called in between schedule
    /// their own as usual.
    ///
    /// Run it beside ``PolicyManager/run()`` (the IdentityServiceLifecycle integration runs both as one
    /// `Service`), or start it with `Task { await enrollment.run() }` and cancel that task at the end.
    public func run() async {
        resumeSuspended()
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .seconds(3_600))
            } catch {
                break
            }
        }
        // A check-in that was running schedules its next one as it ends: call off again until nothing is
        // scheduled and nothing runs.
        repeat {
            let scheduled = state.withLock { state in
                defer {
                    state.suspendedRetries.formUnion(state.retries.keys)
                    state.suspendedRefreshes.formUnion(state.refreshes.keys)
                    state.retries.removeAll()
                    state.refreshes.removeAll()
                }
                return Array(state.retries.values) + Array(state.refreshes.values)
            }
            scheduled.forEach { $0.cancel() }
            await backgroundWork.waitForCurrent()
        } while state.withLock({ !$0.retries.isEmpty || !$0.refreshes.isEmpty }) || backgroundWork.count > 0
    }

    /// Schedules again what the end of the last ``run()`` called off, where it still applies.
    private func resumeSuspended() {
        let retryInterval = policyManager.settings.enrollmentRetryInterval
        let refreshInterval = policyManager.settings.policyRefreshInterval
        state.withLock { state in
            let retries = state.suspendedRetries, refreshes = state.suspendedRefreshes
            state.suspendedRetries.removeAll()
            state.suspendedRefreshes.removeAll()
            for account in retries where state.registered.contains(account) && !state.enrolled.contains(account)
                && state.retries[account] == nil {
                state.retries[account] = scheduleRetry(of: account, after: retryInterval, in: &state)
            }
            for account in refreshes where state.enrolled.contains(account) && state.refreshes[account] == nil {
                state.refreshes[account] = scheduleRefresh(of: account, after: refreshInterval, in: &state)
            }
        }
    }

    // MARK: Helpers

    private func scheduleRetry(of account: Identity, after seconds: TimeInterval, in state: inout State) -> Scheduled {
        let id = state.scheduleID()
        let work = scheduler.schedule(after: seconds) { [weak self] in
            guard let self else { return }
            backgroundWork.start { await self.retry(account, id: id) }
        }
        return Scheduled(id: id, work: work)
    }

    private func scheduleRefresh(of account: Identity, after seconds: TimeInterval, in state: inout State) -> Scheduled {
        let id = state.scheduleID()
        let work = scheduler.schedule(after: seconds) { [weak self] in
            guard let self else { return }
            backgroundWork.start { await self.scheduledRefresh(of: account, id: id) }
        }
        return Scheduled(id: id, work: work)
    }

    /// The check-in `id` scheduled, unless it was called off or replaced meanwhile.
    private func scheduledRefresh(of account: Identity, id: UInt64) async {
        guard state.withLock({ $0.refreshes[account]?.id == id }) else { return }
        await refreshPolicy(for: account)
    }

    private func updateClaims() {
        let claimed = state.withLock { state in Set(state.registered).subtracting(state.enrolled) }
        policyManager.setClaimedAccounts(claimed)
    }

    private enum Channel { case enrollment, policy, unenroll }

    @discardableResult
    private func report(
        _ status: EnrollmentStatus,
        _ channel: Channel
    ) -> EnrollmentStatus {
        if let delegate {
            switch channel {
            case .enrollment: delegate.enrollmentRequest(with: status)
            case .policy: delegate.policyRequest(with: status)
            case .unenroll: delegate.unenrollRequest(with: status)
            }
        }
        policyManager.send(.enrollmentStatus(status))
        return status
    }
}
