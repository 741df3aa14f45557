import IdentityRuntime

/// The UI-identity handshakes of every window (each showing one identity, or several at once), as a state machine (no locks, no callbacks): each event
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
        let identities: [Identity]
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

    /// The identities each window shows (never an empty list: a window showing nothing has no entry).
    private(set) var shown: [WindowID: [Identity]] = [:]
    private var inFlight: [WindowID: InFlight] = [:]
    private var nextToken: UInt64 = 0

    /// The identity `window` shows (the first, when it shows several).
    func identity(for window: WindowID) -> Identity? {
        shown[window]?.first
    }

    /// Every identity `window` shows, in the order they were set.
    func identities(for window: WindowID) -> [Identity] {
        shown[window] ?? []
    }

    /// A new call for `window` with one identity (`nil`: clear the window).
    mutating func start(
        window: WindowID, identity: Identity?, managed: Bool,
        completion: Completion<SwitchIdentityResult>, attempt: SwitchAttempt
    ) -> StartAction {
        start(window: window, identities: identity.map { [$0] } ?? [], needsChecks: managed, completion: completion, attempt: attempt)
    }

    /// A new call for `window`. Without checks (`identities` empty, or none managed) it is applied at once;
    /// otherwise it is put in flight. Either way, the switch in flight for `window` (if any) is superseded.
    mutating func start(
        window: WindowID, identities: [Identity], needsChecks: Bool,
        completion: Completion<SwitchIdentityResult>, attempt: SwitchAttempt
    ) -> StartAction {
        let superseded = inFlight.removeValue(forKey: window)
        guard needsChecks, !identities.isEmpty else {
            shown[window] = identities.isEmpty ? nil : identities
            return .applied(superseded: superseded)
        }
        nextToken &+= 1
        inFlight[window] = InFlight(token: nextToken, identities: identities, completion: completion, attempt: attempt)
        return .runChecks(token: nextToken, superseded: superseded)
    }

    /// The checks of `token` ended with `outcome`.
    mutating func finish(window: WindowID, token: UInt64, outcome: ConditionalLaunchOutcome) -> FinishAction {
        guard let current = inFlight[window], current.token == token else { return .none }
        inFlight[window] = nil
        switch outcome {
        case .passes:
            shown[window] = current.identities
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
        shown[window] = identity.map { [$0] }
        return superseded
    }

    /// Removes `identity` from every window showing it (after a wipe) and supersedes switches to it. A window
    /// showing other identities too keeps them.
    mutating func clear(identity: Identity) -> (windows: [WindowID], superseded: [InFlight]) {
        let windows = shown.filter { $0.value.contains(identity) }.map(\.key)
        for window in windows {
            let remaining = shown[window, default: []].filter { $0 != identity }
            shown[window] = remaining.isEmpty ? nil : remaining
        }
        let superseded = inFlight.filter { $0.value.identities.contains(identity) }
        for window in superseded.keys { inFlight[window] = nil }
        return (windows.sorted { $0.rawValue < $1.rawValue }, Array(superseded.values))
    }

    /// Forgets every identity and supersedes every switch in flight.
    mutating func reset() -> [InFlight] {
        defer {
            shown = [:]
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
