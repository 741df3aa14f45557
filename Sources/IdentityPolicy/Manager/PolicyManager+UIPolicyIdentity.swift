import Dispatch
import IdentityRuntime

extension PolicyManager {
    /// Switches the UI identity of `window` (`nil`: the key window): the app-initiated handshake.
    ///
    /// Rules (<doc:AccountsAndPolicies>), in the order they apply:
    /// 1. `.notAllowed`, at once and without touching anything: `identity` is blocked (``blockReason(for:)``),
    ///    outside ``allowedAccounts``, or claimed (see ``RuntimeSettings/maxManagedAccounts``); or the caller
    ///    is on the main thread with a thread identity that differs from `identity`.
    /// 2. `nil` clears the window's UI identity; `Identity.unmanaged` and unmanaged accounts switch at once.
    ///    Both complete `.success`.
    /// 3. A managed account runs the ``conditionalLaunchChecks`` in order, in a task whose thread identity is
    ///    `identity`. All pass: the UI identity is set, `.success`, unless rule 1 refuses the account by then
    ///    (blocked, wiped, disallowed or claimed while the checks ran): `.notAllowed`, nothing set, nobody
    ///    blocked for it. The first that cancels: `.canceled`; fails:
    ///    `.failed`; the account is then blocked (``BlockAccountReason/conditionalLaunchCanceled`` or
    ///    ``BlockAccountReason/conditionalLaunchBlocked``) until ``unblockAccount(_:reason:)``. The UI identity
    ///    is unchanged unless the result is `.success`. Switching from one managed account to another is
    ///    allowed; the new account's checks run.
    /// 4. A newer call for the same window (rule 2 or 3) supersedes a call still running its checks: the
    ///    older call completes `.canceled` at once and its checks' task is cancelled (a superseded call blocks
    ///    nothing). A rejected call (rule 1) supersedes nothing. Among calls for one window, the last one
    ///    accepted wins.
    ///
    /// Every call completes exactly once, on `completionQueue` (default: a global queue, so a program that
    /// never runs the main loop cannot hang), never while the manager holds a lock. The handler is always
    /// dispatched asynchronously to that queue, never called inline.
    ///
    /// `.uiIdentityDidChange` (``PolicyEvent/uiIdentityDidChange(window:identity:)``) is posted after the
    /// completion is dispatched, when the window's identities changed; a call that sets what the window shows
    /// already completes `.success` and posts nothing.
    public func setUIPolicyIdentity(
        _ identity: Identity?, for window: WindowID? = nil,
        completionQueue: DispatchQueue = .global(),
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void = { _ in }
    ) {
        let completion = SwitchCompletion(queue: completionQueue, handler: completionHandler)
        if let identity {
            startSwitch(unique: CollectionOfOne(identity), window: window, completion: completion)
        } else {
            startSwitch(unique: EmptyCollection(), window: window, completion: completion)
        }
    }

    /// The `async` twin of ``setUIPolicyIdentity(_:for:completionQueue:completionHandler:)``: the same rules,
    /// returning the result.
    ///
    /// It runs on the caller's actor (`isolation`), so the main-thread rule looks at the caller: from the main
    /// actor, a conflicting thread identity gives `.notAllowed`. Cancelling the calling task does not cancel
    /// the switch (a newer call does).
    @discardableResult
    public func setUIPolicyIdentity(
        _ identity: Identity?, for window: WindowID? = nil, isolation: isolated (any Actor)? = #isolation
    ) async -> SwitchIdentityResult {
        let thread = IdentityContext.currentThreadIdentity
        let onMain = thread != nil && IdentityContext.isOnMainThread
        return await withCheckedContinuation { continuation in
            let completion = SwitchCompletion(queue: nil) { continuation.resume(returning: $0) }
            if let identity {
                startSwitch(
                    unique: CollectionOfOne(identity), window: window, completion: completion,
                    onMainThread: onMain, threadIdentity: thread)
            } else {
                startSwitch(
                    unique: EmptyCollection(), window: window, completion: completion,
                    onMainThread: onMain, threadIdentity: thread)
            }
        }
    }

    /// Makes `window` (`nil`: the key window) show several accounts at once, such as a view of two mailboxes:
    /// the same handshake as ``setUIPolicyIdentity(_:for:completionQueue:completionHandler:)`` over every
    /// account.
    ///
    /// - Any account refused by rule 1 makes the whole call `.notAllowed`; on the main thread, the thread
    ///   identity (if any) must be one of `identities`.
    /// - Every managed account's checks run, account after account (each with its own thread identity), in
    ///   the order given; the first that does not pass decides the result and blocks that account.
    /// - An empty list clears the window. Duplicates are dropped.
    ///
    /// While the window shows several accounts, ``policy(forWindow:)`` on the main thread is their combined
    /// policy (``policy(for:)-(Collection<Identity>)``) and ``uiPolicyIdentity(for:)`` is the first of them.
    public func setUIPolicyIdentities(
        _ identities: [Identity], for window: WindowID? = nil,
        completionQueue: DispatchQueue = .global(),
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void = { _ in }
    ) {
        startSwitch(identities, window: window, completion: SwitchCompletion(queue: completionQueue, handler: completionHandler))
    }

    /// The `async` twin of ``setUIPolicyIdentities(_:for:completionQueue:completionHandler:)``.
    @discardableResult
    public func setUIPolicyIdentities(
        _ identities: [Identity], for window: WindowID? = nil, isolation: isolated (any Actor)? = #isolation
    ) async -> SwitchIdentityResult {
        // The main-thread rule looks at the caller, so both are read here, before any suspension; the
        // main-thread test (a queue-specific lookup) only matters with a thread identity set.
        let thread = IdentityContext.currentThreadIdentity
        let onMain = thread != nil && IdentityContext.isOnMainThread
        return await withCheckedContinuation { continuation in
            startSwitch(
                identities, window: window,
                completion: SwitchCompletion(queue: nil) { continuation.resume(returning: $0) },
                onMainThread: onMain, threadIdentity: thread)
        }
    }

    /// Every identity `window` (`nil`: the key window) shows, in the order they were set; empty when none.
    public func uiPolicyIdentities(for window: WindowID? = nil) -> [Identity] {
        let window = resolve(window)
        return state.withLock { $0.switches.identities(for: window) }
    }

    /// The handshake (rules 1 to 4 above) for `requested`, duplicates dropped.
    func startSwitch(
        _ requested: [Identity], window: WindowID?, completion: SwitchCompletion,
        onMainThread: Bool? = nil,
        threadIdentity: Identity? = IdentityContext.currentThreadIdentity
    ) {
        startSwitch(
            unique: requested.count < 2 ? requested : Self.deduplicated(requested), window: window,
            completion: completion, onMainThread: onMainThread, threadIdentity: threadIdentity)
    }

    /// The handshake (rules 1 to 4 above) for `identities`, which has no duplicates. `onMainThread` `nil`:
    /// test the current thread, and only when the main-thread rule needs it (a thread identity is set).
    ///
    /// The common call, one unmanaged account or a clear, takes the manager's lock once and allocates nothing
    /// beyond the completion's dispatch when the window shows that account already (the list the window
    /// shows is made only when it changes); `.uiIdentityDidChange` is posted only when the window's identities
    /// changed.
    func startSwitch<Identities: Collection<Identity>>(
        unique identities: Identities, window: WindowID?, completion: SwitchCompletion,
        onMainThread: Bool? = nil,
        threadIdentity: Identity? = IdentityContext.currentThreadIdentity
    ) {
        let window = resolve(window)
        if let threadIdentity, !identities.isEmpty, !identities.contains(threadIdentity),
           onMainThread ?? IdentityContext.isOnMainThread {
            return completion.deliver(.notAllowed)
        }
        let decision = state.withLock { state -> StartDecision? in
            var managed: [Identity] = []
            for identity in identities {
                switch state.switchStanding(of: identity) {
                case .refused: return nil
                case .managed: managed.append(identity)
                case .unmanaged: break
                }
            }
            // Only a call that runs checks needs an attempt (its task's handle and cancellation flag).
            let attempt = managed.isEmpty ? nil : SwitchAttempt()
            let (action, changed) = state.switches.startReportingChange(
                window: window, identities: identities, needsChecks: attempt != nil,
                completion: completion.stored, attempt: attempt ?? SwitchAttempt())
            if case .applied = action { state.publishUIIdentity(for: window) }
            return StartDecision(action: action, changed: changed, managed: managed, checks: attempt == nil ? [] : state.checks, attempt: attempt)
        }
        guard let decision else { return completion.deliver(.notAllowed) }
        switch decision.action {
        case let .applied(superseded):
            superseded.map(cancel)
            completion.deliver(.success)
            if decision.changed { send(.uiIdentityDidChange(window: window, identity: identities.first)) }
        case let .runChecks(token, superseded):
            superseded.map(cancel)
            // A call is put in flight exactly when it has an attempt (`needsChecks: attempt != nil` above).
            guard let attempt = decision.attempt else { preconditionFailure("a switch in flight has an attempt") }
            let managed = decision.managed
            let checks = decision.checks
            let task = backgroundWork.start { [weak self] in
                var verdict: (outcome: ConditionalLaunchOutcome, account: Identity?) = (.passes, nil)
                for identity in managed where verdict.outcome == .passes {
                    let outcome = await IdentityContext.withThreadIdentity(identity) {
                        await Self.run(checks, identity: identity, window: window, attempt: attempt)
                    }
                    verdict = (outcome, identity)
                }
                self?.finishSwitch(window: window, token: token, outcome: verdict.outcome, account: verdict.account)
            }
            attempt.setTask(task)
        }
    }

    /// What ``startSwitch(_:window:completion:onMainThread:threadIdentity:)`` decided under the lock.
    struct StartDecision {
        let action: UISwitchStateMachine.StartAction
        /// Whether the window's identities changed (an applied call only).
        let changed: Bool
        /// The managed accounts whose checks run, and the checks (empty when none run).
        let managed: [Identity]
        let checks: [any ConditionalLaunchCheck]
        /// The attempt of a call that runs checks.
        let attempt: SwitchAttempt?
    }

    /// `identities` without repeats, in their first order.
    private static func deduplicated(_ identities: [Identity]) -> [Identity] {
        var unique: [Identity] = []
        unique.reserveCapacity(identities.count)
        for identity in identities where !unique.contains(identity) { unique.append(identity) }
        return unique
    }

    private static func run(
        _ checks: [any ConditionalLaunchCheck], identity: Identity, window: WindowID, attempt: SwitchAttempt
    ) async -> ConditionalLaunchOutcome {
        for check in checks {
            if attempt.isCanceled { return .cancels }
            let outcome = await check.evaluate(identity: identity, window: window)
            guard outcome == .passes else { return outcome }
        }
        return .passes
    }

    /// The checks of `token` ended; `account` is the one whose checks decided the outcome.
    private func finishSwitch(window: WindowID, token: UInt64, outcome: ConditionalLaunchOutcome, account: Identity?) {
        let (action, changed) = state.withLock { state in
            // The checks took time: an account blocked (a wipe blocks first), disallowed or claimed meanwhile is
            // refused as it would have been at the start.
            let refused = outcome == .passes
                && state.switches.identitiesInFlight(window: window, token: token)?
                    .contains { state.switchStanding(of: $0) == .refused } == true
            let (action, changed) = state.switches.finishReportingChange(
                window: window, token: token, outcome: outcome, refused: refused)
            if case let .complete(_, _, applied) = action, applied { state.publishUIIdentity(for: window) }
            return (action, changed)
        }
        guard case let .complete(completion, result, _) = action else { return }
        if let account {
            switch outcome {
            case .fails: block(account, reason: .conditionalLaunchBlocked, window: window)
            case .cancels: block(account, reason: .conditionalLaunchCanceled, window: window)
            case .passes: break
            }
        }
        completion.deliver(result)
        if changed { send(.uiIdentityDidChange(window: window, identity: uiPolicyIdentity(for: window))) }
    }

    /// Ends every identity switch whose checks are running, as a newer call would supersede it: each completes
    /// `.canceled`, its checks' task is cancelled, and what they decide afterwards is ignored (no identity is
    /// set and nobody is blocked). For the end of ``run()``.
    func abandonSwitchesInFlight() {
        state.withLock { $0.switches.abandonAll() }.forEach(cancel)
    }

    func cancel(_ flight: UISwitchStateMachine.InFlight) {
        flight.attempt.cancel()
        flight.completion.deliver(.canceled)
    }

    /// Sets the UI identity of `window` directly, superseding a switch in flight (runtime-initiated switches),
    /// unless `identity` may not be shown now (blocked, disallowed or claimed: rule 1 of
    /// ``setUIPolicyIdentity(_:for:completionQueue:completionHandler:)``), decided in the same critical section.
    /// - Returns: whether the identity was set.
    func forceUIIdentity(_ identity: Identity, for window: WindowID) -> Bool {
        let forced = state.withLock { state -> (superseded: UISwitchStateMachine.InFlight?, changed: Bool)? in
            guard state.switchStanding(of: identity) != .refused else { return nil }
            let forced = state.switches.forceReportingChange(window: window, identity: identity)
            state.publishUIIdentity(for: window)
            return forced
        }
        guard let (superseded, changed) = forced else { return false }
        superseded.map(cancel)
        if changed { send(.uiIdentityDidChange(window: window, identity: identity)) }
        return true
    }
}
