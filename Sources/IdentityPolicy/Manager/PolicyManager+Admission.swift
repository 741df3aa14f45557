import Dispatch
import IdentityRuntime

extension PolicyManager {
    /// The checks every admission of a managed account runs, in order (see ``AdmissionCheck``).
    public var admissionChecks: [any AdmissionCheck] {
        get { state.withLock { $0.admission.checks } }
        set { state.withLock { $0.admission.checks = newValue } }
    }

    /// Appends `check` to ``admissionChecks``.
    public func registerAdmissionCheck(_ check: any AdmissionCheck) {
        state.withLock { $0.admission.checks.append(check) }
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
    ///    admission only. Concurrent admissions of one account share one run of the checks; an admission
    ///    cancelled while it waits is refused at once (``AdmissionError/Cause/unavailable(_:)``) and the run goes
    ///    on for the others; a run older than ``RuntimeSettings/admissionCheckTimeout`` is not joined: the
    ///    next admission runs the checks again, and the old run is cancelled, every admission still waiting for
    ///    it refused the same way, blocking and caching nothing.
    ///    Unmanaged accounts and `Identity.unmanaged` run no checks. When a run of the checks
    ///    passes, each admission that ran or waited for it is decided again: an account blocked, dropped from
    ///    ``allowedAccounts``, claimed or undecided while the checks ran is refused as in steps 0 and 1.
    /// 3. `operation` runs under `account` as its thread identity (a `withThreadIdentity` scope: tasks it
    ///    creates inherit it; wrapped queues capture it), on the caller's actor.
    ///
    /// Each call decides exactly once: `operation` runs, or the error is thrown. Errors `operation` throws
    /// pass through unchanged. The ``observer``, if any, hears each decision once, before `operation` runs or
    /// the error is thrown (``PolicyManagerObserver``).
    // Inlinable so that it is specialized for the caller's result type: a middleware's call then looks up no
    // generic metadata at every request.
    @inlinable
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
        backgroundWork.start { [self] in
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

    /// Decides the admission of `account` at once when no admission check has to run for it (no checks, a
    /// pass younger than ``RuntimeSettings/admissionCacheDuration``, an unmanaged account), and the refusals of
    /// steps 0 and 1 of ``withAdmittedIdentity(_:reason:isolation:operation:)``; for a framework that must not
    /// suspend where it admits (an event loop), before it binds the account around the rest of its work.
    ///
    /// - Returns: `true` when `account` is admitted; `false` when its checks must run: call
    ///   ``withAdmittedIdentity(_:reason:isolation:operation:)``, which runs them (or joins their run) and
    ///   decides.
    /// - Throws: the ``AdmissionError`` of a refusal, as ``withAdmittedIdentity(_:reason:isolation:operation:)``
    ///   throws it.
    ///
    /// It binds no identity: run the work under `account` with `IdentityContext.withThreadIdentity`, and only
    /// after `true`. The ``observer``, if any, hears a decision made here, once; `false` decides nothing and
    /// tells it nothing.
    public func admitWithoutWaiting(_ account: Identity, reason: AdmissionReason = .request) throws(AdmissionError) -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        let (decision, observer) = state.withLock { state in
            (state.admissionStepWithoutChecks(for: account, at: now), state.observer)
        }
        switch decision {
        case nil, .checks?:
            return false
        case .admitted?:
            observer?.didAdmit(account, reason: reason)
            return true
        case let .refused(error)?:
            observer?.didRefuseAdmission(error, reason: reason)
            throw error
        }
    }

    /// Decides whether `account` is admitted (steps 0 to 2 of ``withAdmittedIdentity(_:reason:isolation:operation:)``).
    /// The ``observer``, if any, hears the outcome (read in the critical section the decision takes anyway).
    /// Inlined into its callers, as it was before it grew the observer: an asynchronous call of its own costs an
    /// admission a frame and an executor check.
    @usableFromInline @inline(__always)
    func admit(_ account: Identity, reason: AdmissionReason) async throws(AdmissionError) {
        let now = DispatchTime.now().uptimeNanoseconds
        let (step, observer) = state.withLock { state in (state.admissionStep(for: account, at: now), state.observer) }
        // Decided in the critical section (the usual case: admitted, or refused without checks): answered here,
        // without the frame of another asynchronous call, which cost an admission 15% more instructions than
        // before the observer existed, with no observer installed.
        switch step {
        case .admitted, .checks(.admitted):
            observer?.didAdmit(account, reason: reason)
            return
        case let .refused(error):
            observer?.didRefuseAdmission(error, reason: reason)
            throw error
        case .checks:
            break
        }
        guard let observer else { return try await admit(account, reason: reason, step: step) }
        do throws(AdmissionError) {
            try await admit(account, reason: reason, step: step)
        } catch {
            observer.didRefuseAdmission(error, reason: reason)
            throw error
        }
        observer.didAdmit(account, reason: reason)
    }

    /// Carries out the admission step the state decided.
    private func admit(_ account: Identity, reason: AdmissionReason, step: PolicyState.AdmissionDecision) async throws(AdmissionError) {
        let end: AdmissionFlight.End
        switch step {
        case .admitted, .checks(.admitted):
            return
        case let .refused(error):
            throw error
        case let .checks(.join(flight)):
            end = await wait(for: flight, of: account)
        case let .checks(.lead(flight, checks)):
            start(flight, of: account, checks: checks, reason: reason)
            end = await wait(for: flight, of: account)
        }
        let outcome: AdmissionOutcome
        switch end {
        case let .answered(answer):
            outcome = answer
        case .cancelled:
            outcome = .unavailable("the admission was cancelled before its checks answered")
        case .abandoned:
            // It joined a run just as the last admission waiting for it left: decide again, from the start.
            let now = DispatchTime.now().uptimeNanoseconds
            let step = state.withLock { $0.admissionStep(for: account, at: now) }
            return try await admit(account, reason: reason, step: step)
        }
        switch outcome {
        case .admit:
            // The checks passed, but they took time: decide again whether anything since refuses the account.
            if let refusal = state.withLock({ $0.admissionRefusalAfterChecks(for: account) }) { throw refusal }
            return
        case let .deny(message): throw AdmissionError(account: account, result: .failed, cause: .denied(message))
        case let .unavailable(message): throw AdmissionError(account: account, result: .failed, cause: .unavailable(message))
        }
    }

    /// How `flight` ends for one admission (``AdmissionFlight/End/cancelled`` when its task is cancelled first).
    /// The last admission to leave a run that way ends the run: its checks are cancelled, and what they answer
    /// later counts for nobody, as when the admission that ran them inline was cancelled.
    private func wait(for flight: AdmissionFlight, of account: Identity) async -> AdmissionFlight.End {
        let end = await flight.wait()
        if end == .cancelled, flight.beginConclusionIfAbandoned() {
            // Recorded first (a run not answered: nothing blocked or cached), so that a later admission starts a
            // run of its own instead of joining this one.
            record(.unavailable("every admission waiting for the checks was cancelled"), of: account, flight: flight)
            flight.finish(.abandoned)
            flight.cancelRun()
        }
        return end
    }

    /// Runs `checks` for the admissions that wait on `flight`, in a task of the manager's background work (it
    /// inherits the task-locals of the admission that starts it, with `account` as its thread identity; `run()` waits
    /// for it as for the rest of that work): a request cancelled while it waits leaves without ending the run for the
    /// others. A run this one replaced, because it took longer than ``RuntimeSettings/admissionCheckTimeout``, ends
    /// here: its waiters are refused and its task is cancelled. (No timer ends a run: on a starved thread pool the
    /// checks may not have started when a timer fired. A run that hangs holds the admissions already waiting on it
    /// until they are cancelled, and nobody after the timeout.)
    private func start(_ flight: AdmissionFlight, of account: Identity, checks: [any AdmissionCheck], reason: AdmissionReason) {
        if let replaced = flight.takeReplaced() {
            let timeout = settings.admissionCheckTimeout
            let late = AdmissionOutcome.unavailable(
                "the admission checks of \(account.debugDescription) did not answer within \(timeout) s")
            if conclude(replaced, of: account, with: late) { replaced.cancelRun() }
        }
        let run = backgroundWork.start { [self] in
            let outcome = await IdentityContext.withThreadIdentity(account) {
                await Self.run(checks, account: account, reason: reason)
            }
            conclude(flight, of: account, with: outcome)
        }
        flight.setRun(run)
    }

    /// Records `outcome` as the run's and hands it to every admission waiting on `flight`, unless the run was
    /// concluded already (by its checks, or as replaced by a later run). Returns whether it concluded it.
    @discardableResult
    private func conclude(_ flight: AdmissionFlight, of account: Identity, with outcome: AdmissionOutcome) -> Bool {
        guard flight.beginConclusion() else { return false }
        // Recorded before the waiters resume: a pass that lifts a denial's block has lifted it when they decide.
        record(outcome, of: account, flight: flight)
        flight.finish(.answered(outcome))
        return true
    }

    private static func run(_ checks: [any AdmissionCheck], account: Identity, reason: AdmissionReason) async -> AdmissionOutcome {
        for check in checks {
            let outcome = await check.evaluate(account: account, reason: reason)
            guard outcome == .admit else { return outcome }
        }
        return .admit
    }

    /// Records the outcome of a run of the checks: a pass is cached, or, after a denial, lifts the denial's block (a
    /// block change forgets the pass: the next admission runs the checks); a denial blocks the account. The outcome
    /// and the block it sets or lifts change in one critical section: an outcome recorded in between by another run
    /// would otherwise be overruled by this one's block (an account blocked with no denial left to retry) or unblock.
    private func record(_ outcome: AdmissionOutcome, of account: Identity, flight: AdmissionFlight) {
        let now = DispatchTime.now().uptimeNanoseconds
        let transition = state.withLock { state -> AccountTransition? in
            let follow = state.admission.record(
                outcome, of: account, flight: flight, at: now, cacheDuration: state.settings.admissionCacheDuration)
            switch follow {
            case .unblock: return state.changeBlock(of: account) { $0.remove(.admissionCheckFailed) }
            case .block: return state.changeBlock(of: account) { $0.insert(.admissionCheckFailed) }
            case .nothing: return nil
            }
        }
        if let transition { announce([transition], policiesChanged: false, window: nil) }
    }
}
