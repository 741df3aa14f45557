import Dispatch
import IdentityRuntime

extension PolicyManager {
    /// Switches the UI identity of `window` (`nil`: the key window): the app-initiated handshake.
    ///
    /// Rules (DESIGN §4), in the order they apply:
    /// 1. `.notAllowed`, at once and without touching anything: `identity` is an account another component
    ///    manages (not the primary user); or the caller is on the main thread with a thread identity that
    ///    differs from `identity`.
    /// 2. `nil` clears the window's UI identity; ``Identity/unmanaged`` and unmanaged accounts switch at once.
    ///    Both complete `.success`.
    /// 3. The primary user runs the ``conditionalLaunchChecks`` in order, in a task whose thread identity is
    ///    `identity`. All pass: the UI identity is set, `.success`. The first that cancels: `.canceled`; fails:
    ///    `.failed`. The UI identity is unchanged unless the result is `.success`.
    /// 4. A newer call for the same window (rule 2 or 3) supersedes a call still running its checks: the
    ///    older call completes `.canceled` at once and its checks' task is cancelled. A rejected call (rule 1)
    ///    supersedes nothing. Among calls for one window, the last one accepted wins.
    ///
    /// Every call completes exactly once, on `completionQueue` (default: a global queue, so a program that
    /// never runs the main loop cannot hang), never while the manager holds a lock. The handler is always
    /// dispatched asynchronously to that queue, never called inline.
    public func setUIPolicyIdentity(
        _ identity: Identity?, for window: WindowID? = nil,
        completionQueue: DispatchQueue = .global(),
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void = { _ in }
    ) {
        startSwitch(identity, window: window, completion: Completion(queue: completionQueue, handler: completionHandler))
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
        let onMain = IdentityContext.isOnMainThread
        let thread = IdentityContext.currentThreadIdentity
        return await withCheckedContinuation { continuation in
            startSwitch(
                identity, window: window,
                completion: Completion(queue: nil) { continuation.resume(returning: $0) },
                onMainThread: onMain, threadIdentity: thread)
        }
    }

    func startSwitch(
        _ identity: Identity?, window: WindowID?, completion: Completion<SwitchIdentityResult>,
        onMainThread: Bool = IdentityContext.isOnMainThread,
        threadIdentity: Identity? = IdentityContext.currentThreadIdentity
    ) {
        let window = resolve(window)
        let classification = classify(identity)
        if let identity, onMainThread, let threadIdentity, threadIdentity != identity {
            return completion.deliver(.notAllowed)
        }
        if classification == .otherManaged {
            return completion.deliver(.notAllowed)
        }
        let attempt = SwitchAttempt()
        let (action, checks) = state.withLock { state in
            let action = state.switches.start(
                window: window, identity: identity, managed: classification == .managed,
                completion: completion, attempt: attempt)
            if case .applied = action, scope == .processWide {
                IdentityContext.setUIPolicyIdentity(identity, for: window)
            }
            return (action, state.checks)
        }
        switch action {
        case let .applied(superseded):
            superseded.map(cancel)
            completion.deliver(.success)
            send(.uiIdentityDidChange(window: window, identity: identity))
        case let .runChecks(token, superseded):
            superseded.map(cancel)
            guard let identity else { return }
            let task = Task.detached { [weak self] in
                let outcome = await IdentityContext.withThreadIdentity(identity) {
                    await Self.run(checks, identity: identity, window: window, attempt: attempt)
                }
                self?.finishSwitch(window: window, token: token, outcome: outcome)
            }
            attempt.setTask(task)
        }
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

    private func finishSwitch(window: WindowID, token: UInt64, outcome: ConditionalLaunchOutcome) {
        let action = state.withLock { state in
            let action = state.switches.finish(window: window, token: token, outcome: outcome)
            if case let .complete(_, _, applied) = action, applied, scope == .processWide {
                IdentityContext.setUIPolicyIdentity(state.switches.identity(for: window), for: window)
            }
            return action
        }
        guard case let .complete(completion, result, applied) = action else { return }
        completion.deliver(result)
        if applied { send(.uiIdentityDidChange(window: window, identity: uiPolicyIdentity(for: window))) }
    }

    func cancel(_ flight: UISwitchStateMachine.InFlight) {
        flight.attempt.cancel()
        flight.completion.deliver(.canceled)
    }

    /// Sets the UI identity of `window` directly, superseding a switch in flight (runtime-initiated switches).
    func forceUIIdentity(_ identity: Identity?, for window: WindowID) {
        let superseded = state.withLock { state in
            let superseded = state.switches.force(window: window, identity: identity)
            if scope == .processWide { IdentityContext.setUIPolicyIdentity(identity, for: window) }
            return superseded
        }
        superseded.map(cancel)
        send(.uiIdentityDidChange(window: window, identity: identity))
    }
}
