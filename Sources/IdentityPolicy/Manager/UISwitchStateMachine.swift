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

    /// What one window shows: one identity (nearly every window), kept without an array, or several.
    private enum Shown: Equatable {
        case one(Identity)
        /// Two or more, in the order they were set.
        case several([Identity])

        /// `nil` for an empty collection.
        init?(_ identities: some Collection<Identity>) {
            guard let first = identities.first else { return nil }
            self = identities.count == 1 ? .one(first) : .several(Array(identities))
        }

        var first: Identity {
            switch self {
            case let .one(identity): identity
            case let .several(identities): identities[0]
            }
        }

        var all: [Identity] {
            switch self {
            case let .one(identity): [identity]
            case let .several(identities): identities
            }
        }

        func contains(_ identity: Identity) -> Bool {
            switch self {
            case let .one(shown): shown == identity
            case let .several(identities): identities.contains(identity)
            }
        }
    }

    /// What each window shows (a window showing nothing has no entry).
    private var shown: [WindowID: Shown] = [:]
    private var inFlight: [WindowID: InFlight] = [:]
    private var nextToken: UInt64 = 0

    /// The identity `window` shows (the first, when it shows several).
    func identity(for window: WindowID) -> Identity? {
        shown[window]?.first
    }

    /// Every identity `window` shows, in the order they were set.
    func identities(for window: WindowID) -> [Identity] {
        shown[window]?.all ?? []
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
        completion: Completion<SwitchIdentityResult>, attempt: @autoclosure () -> SwitchAttempt
    ) -> StartAction {
        startReportingChange(
            window: window, identities: identities, needsChecks: needsChecks, completion: completion, attempt: attempt()
        ).action
    }

    /// ``start(window:identities:needsChecks:completion:attempt:)``, also telling whether the identities
    /// `window` shows changed (only an applied call changes them). `completion` and `attempt` are made only
    /// for a call put in flight.
    mutating func startReportingChange<Identities: Collection<Identity>>(
        window: WindowID, identities: Identities, needsChecks: Bool,
        completion: @autoclosure () -> Completion<SwitchIdentityResult>, attempt: @autoclosure () -> SwitchAttempt
    ) -> (action: StartAction, changed: Bool) {
        // Most windows have no switch in flight: skip the hash lookup then.
        let superseded = inFlight.isEmpty ? nil : inFlight.removeValue(forKey: window)
        guard needsChecks, !identities.isEmpty else {
            return (.applied(superseded: superseded), show(identities, in: window))
        }
        nextToken &+= 1
        inFlight[window] = InFlight(token: nextToken, identities: Array(identities), completion: completion(), attempt: attempt())
        return (.runChecks(token: nextToken, superseded: superseded), false)
    }

    /// Every switch in flight, taken out of the machine (the manager's `run()` ended): the caller completes each
    /// `.canceled` and cancels its attempt, as for a superseded one; their checks' outcomes then find nothing.
    mutating func abandonAll() -> [InFlight] {
        defer { inFlight.removeAll() }
        return Array(inFlight.values)
    }

    /// The checks of `token` ended with `outcome`.
    mutating func finish(window: WindowID, token: UInt64, outcome: ConditionalLaunchOutcome) -> FinishAction {
        finishReportingChange(window: window, token: token, outcome: outcome).action
    }

    /// The identities the switch `token` of `window` would show, while it is in flight.
    func identitiesInFlight(window: WindowID, token: UInt64) -> [Identity]? {
        guard let current = inFlight[window], current.token == token else { return nil }
        return current.identities
    }

    /// ``finish(window:token:outcome:)``, also telling whether the identities `window` shows changed. With
    /// `refused` (an account of the switch may no longer be shown: it was blocked, disallowed or claimed while
    /// the checks ran), a pass completes `.notAllowed` and shows nothing.
    mutating func finishReportingChange(
        window: WindowID, token: UInt64, outcome: ConditionalLaunchOutcome, refused: Bool = false
    ) -> (action: FinishAction, changed: Bool) {
        guard let current = inFlight[window], current.token == token else { return (.none, false) }
        inFlight[window] = nil
        switch outcome {
        case .passes:
            if refused { return (.complete(current.completion, .notAllowed, applied: false), false) }
            let changed = show(current.identities, in: window)
            return (.complete(current.completion, .success, applied: true), changed)
        case .cancels:
            return (.complete(current.completion, .canceled, applied: false), false)
        case .fails:
            return (.complete(current.completion, .failed, applied: false), false)
        }
    }

    /// Sets the identity of `window` directly (a runtime-initiated switch the delegate accepted), superseding
    /// the switch in flight.
    mutating func force(window: WindowID, identity: Identity?) -> InFlight? {
        forceReportingChange(window: window, identity: identity).superseded
    }

    /// ``force(window:identity:)``, also telling whether the identities `window` shows changed.
    mutating func forceReportingChange(window: WindowID, identity: Identity?) -> (superseded: InFlight?, changed: Bool) {
        let superseded = inFlight.isEmpty ? nil : inFlight.removeValue(forKey: window)
        return (superseded, show(identity.map { [$0] } ?? [], in: window))
    }

    /// Makes `window` show `identities` (empty: nothing); returns whether that differs from what it showed.
    private mutating func show<Identities: Collection<Identity>>(_ identities: Identities, in window: WindowID) -> Bool {
        guard let new = Shown(identities) else {
            return shown.removeValue(forKey: window) != nil
        }
        return Self.replace(&shown[window], with: new)
    }

    /// Replaces `current` with `new` unless they are equal (in place, so the caller's dictionary entry is looked
    /// up once); returns whether they differed.
    private static func replace(_ current: inout Shown?, with new: Shown) -> Bool {
        guard current != new else { return false }
        current = new
        return true
    }

    /// Removes `identity` from every window showing it (after a wipe) and supersedes switches to it. A window
    /// showing other identities too keeps them.
    mutating func clear(identity: Identity) -> (windows: [WindowID], superseded: [InFlight]) {
        let windows = shown.filter { $0.value.contains(identity) }.map(\.key)
        for window in windows {
            let remaining = (shown[window]?.all ?? []).filter { $0 != identity }
            shown[window] = Shown(remaining)
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
