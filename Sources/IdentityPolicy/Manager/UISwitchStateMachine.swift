import IdentityRuntime

/// The UI-identity handshakes of every window, as a state machine (no locks, no callbacks): each event
/// returns the actions the caller performs *after* releasing the lock that guards the machine.
///
/// Invariants:
/// - at most one switch per window is in flight (it runs the conditional-launch checks);
/// - every started switch leaves the machine exactly once: superseded, finished, or completed at start;
/// - the UI identity of a window changes only inside the machine, so the order of changes is the order of
///   the calls that made them (the last call wins).
struct UISwitchStateMachine {
    /// A switch running its checks.
    struct InFlight {
        let token: UInt64
        let identity: Identity
        let completion: Completion<SwitchIdentityResult>
        let attempt: SwitchAttempt
    }

    enum StartAction {
        /// The identity was set now; complete `.success`. `superseded` completes `.canceled`.
        case applied(superseded: InFlight?)
        /// Run the checks for `token`, then call ``finish(window:token:outcome:)``. `superseded` completes
        /// `.canceled`.
        case runChecks(token: UInt64, superseded: InFlight?)
    }

    enum FinishAction {
        /// The switch was superseded meanwhile and has completed already: nothing to do.
        case none
        /// Deliver `result`; `applied` tells whether the identity was set.
        case complete(Completion<SwitchIdentityResult>, SwitchIdentityResult, applied: Bool)
    }

    private(set) var identities: [WindowID: Identity] = [:]
    private var inFlight: [WindowID: InFlight] = [:]
    private var nextToken: UInt64 = 0

    func identity(for window: WindowID) -> Identity? {
        identities[window]
    }

    /// A new call for `window`. Unmanaged and `nil` identities are applied at once; a managed one is put in
    /// flight. Either way, the switch in flight for `window` (if any) is superseded.
    mutating func start(
        window: WindowID, identity: Identity?, managed: Bool,
        completion: Completion<SwitchIdentityResult>, attempt: SwitchAttempt
    ) -> StartAction {
        let superseded = inFlight.removeValue(forKey: window)
        guard managed, let identity else {
            identities[window] = identity
            return .applied(superseded: superseded)
        }
        nextToken &+= 1
        inFlight[window] = InFlight(token: nextToken, identity: identity, completion: completion, attempt: attempt)
        return .runChecks(token: nextToken, superseded: superseded)
    }

    /// The checks of `token` ended with `outcome`.
    mutating func finish(window: WindowID, token: UInt64, outcome: ConditionalLaunchOutcome) -> FinishAction {
        guard let current = inFlight[window], current.token == token else { return .none }
        inFlight[window] = nil
        switch outcome {
        case .passes:
            identities[window] = current.identity
            return .complete(current.completion, .success, applied: true)
        case .cancels:
            return .complete(current.completion, .canceled, applied: false)
        case .fails:
            return .complete(current.completion, .failed, applied: false)
        }
    }

    /// Sets the identity of `window` directly (a runtime-initiated switch the delegate accepted), superseding
    /// the switch in flight.
    mutating func force(window: WindowID, identity: Identity?) -> InFlight? {
        let superseded = inFlight.removeValue(forKey: window)
        identities[window] = identity
        return superseded
    }

    /// Clears every window showing `identity` (after a wipe) and supersedes switches to it.
    mutating func clear(identity: Identity) -> (windows: [WindowID], superseded: [InFlight]) {
        let windows = identities.filter { $0.value == identity }.map(\.key)
        for window in windows { identities[window] = nil }
        let superseded = inFlight.filter { $0.value.identity == identity }
        for window in superseded.keys { inFlight[window] = nil }
        return (windows.sorted { $0.rawValue < $1.rawValue }, Array(superseded.values))
    }

    /// Forgets every identity and supersedes every switch in flight.
    mutating func reset() -> [InFlight] {
        defer {
            identities = [:]
            inFlight = [:]
        }
        return Array(inFlight.values)
    }
}

/// The task running one switch's checks, cancelled when the switch is superseded.
final class SwitchAttempt: Sendable {
    private let state = LockedValue<(task: Task<Void, Never>?, canceled: Bool)>((nil, false))

    var isCanceled: Bool { state.withLock { $0.canceled } }

    func setTask(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { state -> Bool in
            state.task = task
            return state.canceled
        }
        if cancelNow { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.canceled = true
            return state.task
        }
        task?.cancel()
    }
}
