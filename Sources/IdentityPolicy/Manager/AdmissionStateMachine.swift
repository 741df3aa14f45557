import Dispatch
import IdentityRuntime

/// The admission state machine: passes still trusted, denials waiting for their retry, and the checks
/// running (one run per account: concurrent admissions of an account share it). A plain value kept under the
/// manager's lock; times are uptime nanoseconds, passed in, so its tests choose them.
///
/// The refusals that come before it (policies not loaded, blocked, not allowed, claimed) are
/// ``PolicyState/admissionStep(for:at:)``'s; this type decides what a managed account that passed them needs.
struct AdmissionStateMachine {
    /// What an admission of a managed account does next.
    enum Step {
        /// Admitted now: a pass is still trusted, or there are no checks.
        case admitted
        /// Run `checks`, then ``record(_:of:flight:at:cacheDuration:)`` and finish `flight`.
        case lead(AdmissionFlight, [any AdmissionCheck])
        /// Another admission of the account runs the checks: wait for its outcome.
        case join(AdmissionFlight)
    }

    /// What the manager does after a run of the checks was recorded.
    enum Follow: Equatable {
        case nothing
        /// Lift the account's ``BlockAccountReason/admissionCheckFailed`` block (a pass after a denial).
        case unblock
        /// Block the account for ``BlockAccountReason/admissionCheckFailed`` (a denial).
        case block
    }

    /// The checks every admission of a managed account runs, in order. Changing them forgets every pass, and
    /// the runs under way: an admission that starts later runs the new checks instead of joining a run of the
    /// replaced ones, and a pass such a run records is not cached.
    var checks: [any AdmissionCheck] = [] {
        didSet {
            admitted = [:]
            flights = [:]
        }
    }

    /// Until when each account's last pass is trusted.
    private var admitted: [Identity: UInt64] = [:]
    /// When each account was last denied.
    private var denied: [Identity: UInt64] = [:]
    private var flights: [Identity: AdmissionFlight] = [:]

    /// What an admission of the managed `account` at `now` does. A run under way for longer than `timeout`
    /// seconds (a value that is not a positive number counts as 30) is not joined: a new run replaces it, and
    /// the admission that leads the new run ends the old one (``AdmissionFlight/takeReplaced()``).
    mutating func start(for account: Identity, at now: UInt64, timeout: Double = .infinity) -> Step {
        if admitsWithoutChecks(account, at: now) { return .admitted }
        let stale = flights[account]
        let limit = timeout > 0 ? timeout : 30
        if let stale, now < stale.startedAt &+ Self.nanoseconds(limit) { return .join(stale) }
        let flight = AdmissionFlight(startedAt: now, replacing: stale)
        flights[account] = flight
        return .lead(flight, checks)
    }

    /// Whether ``start(for:at:)`` would admit `account` at `now` at once (a pass still trusted, or no checks).
    func admitsWithoutChecks(_ account: Identity, at now: UInt64) -> Bool {
        // Without checks every account is admitted, a pass or not: no lookup.
        if checks.isEmpty { return true }
        if let until = admitted[account], now < until { return true }
        return false
    }

    /// Whether an admission at `now` runs the checks of `account` again although it is blocked for
    /// ``BlockAccountReason/admissionCheckFailed``: its denial is older than `retryInterval` seconds.
    func retriesDenial(of account: Identity, at now: UInt64, retryInterval: Double) -> Bool {
        guard let deniedAt = denied[account] else { return false }
        return now >= deniedAt &+ Self.nanoseconds(retryInterval)
    }

    /// Forgets `account`'s pass (its block changed: the next admission decides again).
    mutating func forgetPass(of account: Identity) {
        admitted[account] = nil
    }

    /// Records the `outcome` of `flight`, a run of `account`'s checks that ended at `now`: a pass is trusted
    /// for `cacheDuration` seconds and lifts a denial; a denial is remembered for its retry. The outcome of a
    /// run that is no longer the account's (its checks were replaced while they ran, or a later run replaced
    /// it) changes nothing: a pass is not trusted and lifts no denial, a denial blocks nothing.
    mutating func record(
        _ outcome: AdmissionOutcome, of account: Identity, flight: AdmissionFlight, at now: UInt64, cacheDuration: Double
    ) -> Follow {
        // A run that is no longer the account's ran checks that were replaced since it started.
        let isCurrent = flights[account] === flight
        if isCurrent { flights[account] = nil }
        switch outcome {
        case .admit:
            guard isCurrent else { return .nothing }
            let cache = Self.nanoseconds(cacheDuration)
            if cache > 0 { admitted[account] = now &+ cache }
            return denied.removeValue(forKey: account) != nil ? .unblock : .nothing
        case .deny:
            // Checks that were replaced while they ran, or a run that was given up, decide nothing for later.
            guard isCurrent else { return .nothing }
            denied[account] = now
            return .block
        case .unavailable:
            return .nothing
        }
    }

    /// How many admissions wait for the run of `account`'s checks under way (0 when none runs).
    func waitingAdmissions(of account: Identity) -> Int {
        flights[account]?.waiting ?? 0
    }

    /// `seconds` (clamped to 0 ... 1e9) in nanoseconds.
    private static func nanoseconds(_ seconds: Double) -> UInt64 {
        UInt64(seconds.clampedNanoseconds)
    }
}

/// One run of an account's admission checks, awaited by every admission that arrives while it runs, the one
/// that started it included. The checks run in a task of the run's own, so that no waiting request decides
/// for the others: a request cancelled while it waits leaves alone, and the run goes on for the rest.
final class AdmissionFlight: Sendable {
    /// How the run ended for one admission that waited for it.
    enum End: Sendable, Equatable {
        /// The run's outcome: its checks' answer, or the refusal of a run a later one replaced.
        case answered(AdmissionOutcome)
        /// The admission's own task was cancelled first.
        case cancelled
        /// Every admission that waited before this one was cancelled, and the run was ended for nobody: not an
        /// answer about the account; the admission decides again with a run of its own.
        case abandoned
    }

    private struct State {
        /// The run this one replaced because it took too long, until the leader of this one ends it.
        var replaced: AdmissionFlight?
        /// How the run ended (``End/answered(_:)`` or ``End/abandoned``), once it has.
        var end: End?
        /// Whether the run is being concluded (by its checks' answer, by a later run that replaced it, or by
        /// the last waiter leaving), by one caller only.
        var concluding = false
        var waiters: [UInt64: CheckedContinuation<End, Never>] = [:]
        var nextWaiter: UInt64 = 0
        var run: Task<Void, Never>?
    }

    private let state: LockedValue<State>
    /// When the run started (uptime nanoseconds).
    let startedAt: UInt64

    init(startedAt: UInt64 = 0, replacing replaced: AdmissionFlight? = nil) {
        self.startedAt = startedAt
        state = LockedValue(State(replaced: replaced))
    }

    /// The run this one replaced because it took too long, once (`nil` afterwards, and when none).
    func takeReplaced() -> AdmissionFlight? {
        state.withLock { state in
            defer { state.replaced = nil }
            return state.replaced
        }
    }

    /// Keeps the task that runs the checks, to cancel it if they time out.
    func setRun(_ run: Task<Void, Never>) {
        state.withLock { $0.run = run }
    }

    /// How the run ends for the calling admission; ``End/cancelled`` if its task is cancelled first.
    func wait() async -> End {
        let id = state.withLock { state in
            defer { state.nextWaiter &+= 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let early = state.withLock { state -> End? in
                    if let end = state.end { return end }
                    // Cancelled before it got here: the handler below found no waiter to resume.
                    if Task.isCancelled { return .cancelled }
                    state.waiters[id] = continuation
                    return nil
                }
                if let early { continuation.resume(returning: early) }
            }
        } onCancel: {
            // Whoever takes the waiter out of the table resumes it, exactly once.
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: .cancelled)
        }
    }

    /// How many admissions wait for this run now.
    var waiting: Int {
        state.withLock { $0.waiters.count }
    }

    /// Whether the caller is the first to conclude the run (its checks answered, or a later run replaced it);
    /// only the first records an outcome and calls ``finish(_:)``.
    func beginConclusion() -> Bool {
        state.withLock { state in
            defer { state.concluding = true }
            return !state.concluding
        }
    }

    /// Whether the caller concludes the run because nobody waits for it any more (every admission that waited
    /// was cancelled); like ``beginConclusion()``, true for one caller only.
    func beginConclusionIfAbandoned() -> Bool {
        state.withLock { state in
            guard !state.concluding, state.waiters.isEmpty else { return false }
            state.concluding = true
            return true
        }
    }

    /// Cancels the task that runs the checks (they took too long, or nobody waits for them).
    func cancelRun() {
        state.withLock { $0.run }?.cancel()
    }

    /// Resumes every waiter with `end`, outside the lock; later waiters get it at once.
    func finish(_ end: End) {
        let waiters = state.withLock { state in
            state.end = end
            defer { state.waiters = [:] }
            return state.waiters.values
        }
        for waiter in waiters { waiter.resume(returning: end) }
    }
}
