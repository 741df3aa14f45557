import Foundation
import IdentityRuntime

/// Registers and enrolls accounts (the analog of `IntuneMAMEnrollmentManager`). One account is enrolled
/// (managed) at a time; it becomes the ``PolicyManager/primaryUser``.
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
/// | another account enrolled | enroll | 227 `singleManagedAccountMode`, not registered |
/// | registered | enroll, service 1xx | enrolled, primary user, check-ins every ``RuntimeSettings/policyRefreshInterval`` |
/// | registered | enroll, retryable 2xx | stays registered, retried every ``RuntimeSettings/enrollmentRetryInterval`` |
/// | registered | enroll, 209/210/211 | deregistered, no retry |
/// | registered | enroll, other 2xx | stays registered, no retry |
/// | enrolled | check-in 102 `wipeReceived` | wiped and unenrolled |
/// | registered or enrolled | deregister | 104 `unenrollmentSuccess`, optional wipe |
/// | neither | deregister | 214 `notEnrolledAccount` |
///
/// Every operation reports to the ``delegate`` and as a ``PolicyEvent/enrollmentStatus(_:)`` event.
public final class EnrollmentManager: Sendable {
    public let policyManager: PolicyManager
    public let service: any EnrollmentService
    public let scheduler: any EnrollmentScheduler

    private struct State {
        var registered: [Identity] = []
        var enrolled: Identity?
        var allowedAccounts: [Identity]?
        var retries: [Identity: any ScheduledWork] = [:]
        var refresh: (any ScheduledWork)?
        var delegate: (any EnrollmentDelegate)?
    }

    private let state: LockedValue<State>

    public init(
        policyManager: PolicyManager, service: any EnrollmentService,
        scheduler: any EnrollmentScheduler = DispatchEnrollmentScheduler()
    ) {
        self.policyManager = policyManager
        self.service = service
        self.scheduler = scheduler
        var initial = State()
        initial.allowedAccounts = policyManager.settings.allowedAccounts
        state = LockedValue(initial)
    }

    deinit {
        state.withLock { state in
            state.refresh?.cancel()
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

    /// The enrolled (managed) account.
    public var enrolledAccount: Identity? {
        state.withLock { $0.enrolled }
    }

    /// The only accounts that may enroll (`nil`: any). Starts as ``RuntimeSettings/allowedAccounts``; a change
    /// posts `.allowedAccountsDidChange`.
    public var allowedAccounts: [Identity]? {
        get { state.withLock { $0.allowedAccounts } }
        set {
            let changed = state.withLock { state in
                defer { state.allowedAccounts = newValue }
                return state.allowedAccounts != newValue
            }
            if changed { policyManager.send(.allowedAccountsDidChange(newValue)) }
        }
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
    @discardableResult
    public func registerAndEnrollAccount(_ account: Identity) async -> EnrollmentStatus {
        enum Gate { case refuse(EnrollmentStatusCode, String), proceed }
        let gate = state.withLock { state -> Gate in
            if account.isUnmanaged { return .refuse(.nilAccount, "no account given") }
            if let allowed = state.allowedAccounts, !allowed.contains(account) {
                return .refuse(.notEmmAccount, "\(account.name) is not an allowed account")
            }
            if state.enrolled == account { return .refuse(.alreadyEnrolled, "\(account.name) is enrolled already") }
            if let other = state.enrolled {
                return .refuse(.singleManagedAccountMode, "\(other.name) is the managed account; unenroll it first")
            }
            if !state.registered.contains(account) { state.registered.append(account) }
            state.retries.removeValue(forKey: account)?.cancel()
            return .proceed
        }
        if case let .refuse(code, message) = gate {
            return report(EnrollmentStatus(identity: account, statusCode: code, errorString: message), .enrollment)
        }
        updateClaims()
        let response = await service.enroll(account)
        var code = response.statusCode
        var message = response.message
        let retryInterval = policyManager.settings.enrollmentRetryInterval
        let refreshInterval = policyManager.settings.policyRefreshInterval
        let enrolled = state.withLock { state -> Bool in
            guard state.registered.contains(account) else {
                code = .reEnrollForUnenrolledUser
                message = "\(account.name) was deregistered while enrolling"
                return false
            }
            if code.isSuccess {
                if let other = state.enrolled, other != account {
                    code = .singleManagedAccountMode
                    message = "\(other.name) enrolled first"
                    state.registered.removeAll { $0 == account }
                    return false
                }
                state.enrolled = account
                state.refresh?.cancel()
                state.refresh = scheduleRefresh(after: refreshInterval)
                return true
            }
            if code.requiresAccountRemoval {
                state.registered.removeAll { $0 == account }
            } else if code.isRetryable {
                state.retries[account] = scheduler.schedule(after: retryInterval) { [weak self] in
                    guard let self else { return }
                    Task { await self.retry(account) }
                }
            }
            return false
        }
        if enrolled { policyManager.setPrimaryUser(account) }
        updateClaims()
        let status = report(EnrollmentStatus(identity: account, statusCode: code, errorString: message), .enrollment)
        if enrolled, code == .wipeReceived {
            _ = await deRegisterAndUnenrollAccount(account, withWipe: true)
        }
        return status
    }

    private func retry(_ account: Identity) async {
        let due = state.withLock { state -> Bool in
            guard state.retries.removeValue(forKey: account) != nil else { return false }
            return state.registered.contains(account) && state.enrolled == nil
        }
        if due { await registerAndEnrollAccount(account) }
    }

    /// Checks in for the enrolled account's policy now (it also happens every
    /// ``RuntimeSettings/policyRefreshInterval``). 100 posts `.policyDidChange`; 102 wipes and unenrolls.
    @discardableResult
    public func refreshPolicy() async -> EnrollmentStatus? {
        guard let account = enrolledAccount else { return nil }
        let response = await service.checkIn(account)
        let interval = policyManager.settings.policyRefreshInterval
        state.withLock { state in
            guard state.enrolled == account else { return }
            state.refresh?.cancel()
            state.refresh = scheduleRefresh(after: interval)
        }
        let status = report(EnrollmentStatus(identity: account, statusCode: response.statusCode, errorString: response.message), .policy)
        switch response.statusCode {
        case .newPoliciesReceived: policyManager.send(.policyDidChange)
        case .wipeReceived, .policyRecordGone: _ = await deRegisterAndUnenrollAccount(account, withWipe: response.statusCode == .wipeReceived)
        default: break
        }
        return status
    }

    /// Unenrolls and deregisters `account`; with `withWipe`, runs the selective wipe
    /// (``PolicyManager/wipeData(forAccount:)``) afterwards.
    @discardableResult
    public func deRegisterAndUnenrollAccount(_ account: Identity, withWipe: Bool) async -> EnrollmentStatus {
        let wasEnrolled = state.withLock { state -> Bool? in
            guard state.registered.contains(account) || state.enrolled == account else { return nil }
            state.retries.removeValue(forKey: account)?.cancel()
            return state.enrolled == account
        }
        guard let wasEnrolled else {
            return report(EnrollmentStatus(identity: account, statusCode: .notEnrolledAccount, errorString: "\(account.name) is not registered"), .unenroll)
        }
        var message: String?
        if wasEnrolled {
            let response = await service.unenroll(account)
            if !response.statusCode.isSuccess { message = "service answered \(response.statusCode.rawValue); unenrolled locally" }
        }
        state.withLock { state in
            state.registered.removeAll { $0 == account }
            if state.enrolled == account {
                state.enrolled = nil
                state.refresh?.cancel()
                state.refresh = nil
            }
        }
        if wasEnrolled { policyManager.setPrimaryUser(nil) }
        updateClaims()
        if withWipe { await policyManager.wipeData(forAccount: account) }
        return report(EnrollmentStatus(identity: account, statusCode: .unenrollmentSuccess, errorString: message), .unenroll)
    }

    // MARK: Helpers

    private func scheduleRefresh(after seconds: TimeInterval) -> any ScheduledWork {
        scheduler.schedule(after: seconds) { [weak self] in
            guard let self else { return }
            Task { await self.refreshPolicy() }
        }
    }

    private func updateClaims() {
        let claimed = state.withLock { state in Set(state.registered).subtracting(state.enrolled.map { [$0] } ?? []) }
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
