import Dispatch
import IdentityRuntime

/// The admissions the manager remembers: passes still trusted, denials waiting for their retry, and checks
/// running (one per account: concurrent admissions of an account share it).
struct AdmissionState {
    var checks: [any AdmissionCheck] = []
    /// Until when (uptime nanoseconds) each account's last pass is trusted.
    var admitted: [Identity: UInt64] = [:]
    /// When (uptime nanoseconds) each account was last denied.
    var denied: [Identity: UInt64] = [:]
    var flights: [Identity: AdmissionFlight] = [:]
}

/// One run of an account's admission checks, awaited by every admission that arrives while it runs.
final class AdmissionFlight: Sendable {
    private let state = LockedValue<(outcome: AdmissionOutcome?, waiters: [CheckedContinuation<AdmissionOutcome, Never>])>((nil, []))

    func wait() async -> AdmissionOutcome {
        await withCheckedContinuation { continuation in
            let outcome = state.withLock { state -> AdmissionOutcome? in
                if let outcome = state.outcome { return outcome }
                state.waiters.append(continuation)
                return nil
            }
            if let outcome { continuation.resume(returning: outcome) }
        }
    }

    /// Resumes every waiter, outside the lock; later waiters get `outcome` at once.
    func finish(_ outcome: AdmissionOutcome) {
        let waiters = state.withLock { state in
            state.outcome = outcome
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }
}

extension PolicyManager {
    /// The checks every admission of a managed account runs, in order (see ``AdmissionCheck``).
    public var admissionChecks: [any AdmissionCheck] {
        get { state.withLock { $0.admission.checks } }
        set {
            state.withLock { state in
                state.admission.checks = newValue
                state.admission.admitted = [:]
            }
        }
    }

    /// Appends `check` to ``admissionChecks``.
    public func registerAdmissionCheck(_ check: any AdmissionCheck) {
        state.withLock { state in
            state.admission.checks.append(check)
            state.admission.admitted = [:]
        }
    }

    /// Admits `account` and runs `operation` under it (<doc:ServiceBoundary>): the service boundary, for a request
    /// handler before it acts for an account.
    ///
    /// 0. Refused at once while the ``policySource`` has not loaded its policies (``PolicySource/hasLoaded``):
    ///    ``SwitchIdentityResult/failed`` with ``AdmissionError/Cause/unavailable(_:)``, for every account but
    ///    `Identity.unmanaged`; the same call succeeds once the policies are in.
    /// 1. Refused at once, with an ``AdmissionError`` whose ``AdmissionError/result`` is
    ///    ``SwitchIdentityResult/notAllowed``: a blocked account (``blockReason(for:)``), an account outside
    ///    ``allowedAccounts``, an account managed elsewhere (claimed).
    /// 2. A managed account runs the ``admissionChecks`` in order, with the account as its thread identity,
    ///    unless a pass of them is younger than ``RuntimeSettings/admissionCacheDuration``. Concurrent
    ///    admissions of one account share one run of the checks. A check that denies the account fails the
    ///    admission (``SwitchIdentityResult/failed``) and blocks the account
    ///    (``BlockAccountReason/admissionCheckFailed``); after ``RuntimeSettings/admissionRetryInterval`` the
    ///    next admission runs the checks again, and a pass unblocks it. A check that cannot decide fails this
    ///    admission only. Unmanaged accounts and `Identity.unmanaged` run no checks.
    /// 3. `operation` runs under `account` as its thread identity (a `withThreadIdentity` scope: tasks it
    ///    creates inherit it; wrapped queues capture it), on the caller's actor.
    ///
    /// Each call decides exactly once: `operation` runs, or the error is thrown. Errors `operation` throws
    /// pass through unchanged.
    public func withAdmittedIdentity<Result>(
        _ account: Identity, reason: AdmissionReason = .request,
        isolation: isolated (any Actor)? = #isolation,
        operation: () async throws -> Result
    ) async throws -> Result {
        try await admit(account, reason: reason)
        return try await IdentityContext.withThreadIdentity(account, operation: operation)
    }

    /// The completion-handler form of ``withAdmittedIdentity(_:reason:isolation:operation:)``: once admitted,
    /// `operation` runs on `queue` under `account` as its thread identity, then `completionHandler(nil)` runs
    /// on `queue`; refused, `completionHandler` gets the ``AdmissionError`` and `operation` never runs. The
    /// completion handler is called exactly once, never while the manager holds a lock.
    public func withAdmittedIdentity(
        _ account: Identity, reason: AdmissionReason = .request, queue: DispatchQueue = .global(),
        operation: @escaping @Sendable () -> Void,
        completionHandler: @escaping @Sendable (AdmissionError?) -> Void
    ) {
        Task.detached { [self] in
            do throws(AdmissionError) {
                try await admit(account, reason: reason)
            } catch {
                queue.async { completionHandler(error) }
                return
            }
            queue.async {
                IdentityContext.withThreadIdentity(account, operation: operation)
                completionHandler(nil)
            }
        }
    }

    /// Decides whether `account` is admitted (steps 1 and 2 of ``withAdmittedIdentity(_:reason:isolation:operation:)``).
    func admit(_ account: Identity, reason: AdmissionReason) async throws(AdmissionError) {
        enum Step {
            case admitted
            case refused(AdmissionError)
            case lead(AdmissionFlight, [any AdmissionCheck])
            case join(AdmissionFlight)
        }
        let now = DispatchTime.now().uptimeNanoseconds
        let step = state.withLock { state -> Step in
            guard !account.isUnmanaged else { return .admitted }
            // Before the policy source's first load nothing tells a managed account from an unmanaged one, or
            // a blocked one from an allowed one: nobody is admitted (deny by default).
            guard state.policiesLoaded else {
                return .refused(AdmissionError(
                    account: account, result: .failed, cause: .unavailable("the policy source has not loaded its policies yet")))
            }
            if let block = Self.blockReason(for: account, in: state), !Self.retriesDenial(of: account, at: now, in: state) {
                return .refused(AdmissionError(account: account, result: .notAllowed, cause: .blocked(block)))
            }
            if let allowed = state.settings.allowedAccounts, !allowed.contains(account) {
                return .refused(AdmissionError(account: account, result: .notAllowed, cause: .notInAllowedAccounts))
            }
            switch state.accounts.standing(of: account) {
            case nil: return .admitted
            case .claimed: return .refused(AdmissionError(account: account, result: .notAllowed, cause: .claimed))
            case .managed: break
            }
            if let until = state.admission.admitted[account], now < until { return .admitted }
            if state.admission.checks.isEmpty { return .admitted }
            if let flight = state.admission.flights[account] { return .join(flight) }
            let flight = AdmissionFlight()
            state.admission.flights[account] = flight
            return .lead(flight, state.admission.checks)
        }
        let outcome: AdmissionOutcome
        switch step {
        case .admitted:
            return
        case let .refused(error):
            throw error
        case let .join(flight):
            outcome = await flight.wait()
        case let .lead(flight, checks):
            outcome = await IdentityContext.withThreadIdentity(account) {
                await Self.run(checks, account: account, reason: reason)
            }
            record(outcome, of: account, flight: flight)
            flight.finish(outcome)
        }
        switch outcome {
        case .admit: return
        case let .deny(message): throw AdmissionError(account: account, result: .failed, cause: .denied(message))
        case let .unavailable(message): throw AdmissionError(account: account, result: .failed, cause: .unavailable(message))
        }
    }

    /// Whether an admission at `now` runs the checks of `account` again although it is blocked: its only
    /// cause is a denial older than the retry interval.
    private static func retriesDenial(of account: Identity, at now: UInt64, in state: State) -> Bool {
        guard state.blocks[account] == [.admissionCheckFailed], let deniedAt = state.admission.denied[account] else { return false }
        if case let .managed(policy) = state.accounts.standing(of: account), policy.isAccountBlocked { return false }
        let retry = UInt64(max(0, min(state.settings.admissionRetryInterval, 1e9)) * 1e9)
        return now >= deniedAt &+ retry
    }

    private static func run(_ checks: [any AdmissionCheck], account: Identity, reason: AdmissionReason) async -> AdmissionOutcome {
        for check in checks {
            let outcome = await check.evaluate(account: account, reason: reason)
            guard outcome == .admit else { return outcome }
        }
        return .admit
    }

    /// Records the outcome of a run of the checks: a pass is cached (and lifts a denial's block); a denial
    /// blocks the account.
    private func record(_ outcome: AdmissionOutcome, of account: Identity, flight: AdmissionFlight) {
        let now = DispatchTime.now().uptimeNanoseconds
        let wasDenied = state.withLock { state -> Bool in
            if state.admission.flights[account] === flight { state.admission.flights[account] = nil }
            switch outcome {
            case .admit:
                let cache = UInt64(max(0, min(state.settings.admissionCacheDuration, 1e9)) * 1e9)
                if cache > 0 { state.admission.admitted[account] = now &+ cache }
                return state.admission.denied.removeValue(forKey: account) != nil
            case .deny:
                state.admission.denied[account] = now
                return false
            case .unavailable:
                return false
            }
        }
        switch outcome {
        case .admit where wasDenied: unblockAccount(account, reason: .admissionCheckFailed)
        case .deny: block(account, reason: .admissionCheckFailed, window: nil)
        default: break
        }
    }
}
