import Dispatch
import IdentityRuntime

extension PolicyManager {
    /// Asks the ``delegate`` to switch `window` (`nil`: the key window) to `identity` (`""`: an unmanaged
    /// account) for `reason`, and suspends until it answers: the runtime-initiated handshake.
    ///
    /// - The delegate may answer on any thread, synchronously or later, exactly once. Later answers are
    ///   ignored and reported as runtime issues.
    /// - A blocked, disallowed or claimed account (the rule 1 of
    ///   ``setUIPolicyIdentity(_:for:completionQueue:completionHandler:)``): `.notAllowed` at once, without
    ///   asking the delegate.
    /// - No delegate: `.failed` at once. No answer within ``RuntimeSettings/delegateTimeout`` seconds:
    ///   `.failed`. The calling task cancelled before the answer: `.canceled`.
    /// - On `.success` the runtime sets the window's UI identity to `identity` itself (superseding an
    ///   app-initiated switch still running its checks) and posts `.uiIdentityDidChange`, unless the account
    ///   was blocked, disallowed or claimed while the delegate decided: then nothing is set and the result is
    ///   `.notAllowed`.
    public func requestIdentitySwitch(
        to identity: Identity, reason: IdentitySwitchReason, window: WindowID? = nil
    ) async -> SwitchIdentityResult {
        let (delegate, timeout, standing) = state.withLock {
            ($0.delegate, $0.settings.delegateTimeout, $0.switchStanding(of: identity))
        }
        guard standing != .refused else { return .notAllowed }
        guard let delegate else { return .failed }
        let window = resolve(window)
        let result = await DelegateAnswer<SwitchIdentityResult>.wait(
            operation: "identitySwitchRequired(\(String(reflecting: identity.name)), reason: \(reason), window: \(window))",
            timeout: timeout, onTimeout: .failed, onCancel: .canceled
        ) { answer in
            delegate.identitySwitchRequired(identity, reason: reason, window: window, completionHandler: answer)
        }
        // The delegate took time: an account blocked (a wipe blocks first), disallowed or claimed while it
        // decided is not shown.
        if result == .success, !forceUIIdentity(identity, for: window) { return .notAllowed }
        return result
    }

    /// Asks the ``delegate`` to add (sign in) `identity`, e.g. to enroll it automatically, and suspends until
    /// it answers. The same rules as ``requestIdentitySwitch(to:reason:window:)``: exactly one answer counts;
    /// no delegate, a timeout or cancellation give `.failed`.
    public func addIdentity(_ identity: Identity) async -> AddIdentityResult {
        let (delegate, timeout) = state.withLock { ($0.delegate, $0.settings.delegateTimeout) }
        guard let delegate, !identity.isUnmanaged else { return .failed }
        return await DelegateAnswer<AddIdentityResult>.wait(
            operation: "addIdentity(\(String(reflecting: identity.name)))",
            timeout: timeout, onTimeout: .failed, onCancel: .failed
        ) { answer in
            delegate.addIdentity(identity, completionHandler: answer)
        }
    }

    /// The completion-handler form of ``addIdentity(_:)``; `completionHandler` runs once on a global queue.
    public func addIdentity(_ identity: Identity, completionHandler: @escaping @Sendable (AddIdentityResult) -> Void) {
        backgroundWork.start { [self] in
            let result = await addIdentity(identity)
            DispatchQueue.global().async { completionHandler(result) }
        }
    }

    /// Asks for a fresh start of the app (see ``PolicyDelegate/restartApplication()``): the delegate's
    /// `restartApplication()` runs; when there is no delegate or it returns `false`, `.restartRequired` is
    /// posted. The runtime never terminates the process.
    /// - Returns: whether the delegate handled it.
    @discardableResult
    public func restartApplication() -> Bool {
        let handled = delegate?.restartApplication() ?? false
        if !handled { send(.restartRequired) }
        return handled
    }
}
