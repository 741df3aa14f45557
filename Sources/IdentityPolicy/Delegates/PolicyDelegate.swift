import IdentityRuntime

/// The app's side of the runtime-initiated handshakes (the analog of `IntuneMAMPolicyDelegate`).
///
/// Every method has a default implementation, so an app implements only what it supports. The runtime calls
/// the methods on arbitrary threads; none of them is called while the runtime holds a lock.
///
/// Completion handlers may be called on any thread, synchronously or later, **exactly once**. A second call is
/// ignored and reported as a runtime issue. A handler that is never called makes the request complete
/// ``SwitchIdentityResult/failed`` (or ``AddIdentityResult/failed``) after
/// ``RuntimeSettings/delegateTimeout``.
public protocol PolicyDelegate: AnyObject, Sendable {
    /// The runtime needs the UI of `window` to switch to `identity` (`""`: an unmanaged account) for `reason`.
    /// Switch, then call `completionHandler` with ``SwitchIdentityResult/success``; or refuse with
    /// ``SwitchIdentityResult/canceled`` / ``SwitchIdentityResult/failed``. On success the runtime sets the
    /// window's UI identity itself.
    func identitySwitchRequired(
        _ identity: Identity, reason: IdentitySwitchReason, window: WindowID,
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void)

    /// The runtime wants the app to add (sign in) `identity`, e.g. to auto-enroll it on launch.
    func addIdentity(_ identity: Identity, completionHandler: @escaping @Sendable (AddIdentityResult) -> Void)

    /// Selectively wipes `account`'s data. Called on a background thread, never on the main queue.
    ///
    /// - Returns: `true` when the app deleted the account's data itself; `false` to let the runtime delete
    ///   every file the account owns under the protected roots and destroy its keys.
    func wipeData(forAccount account: Identity) -> Bool

    /// `account` was blocked for `reason` (see ``BlockAccountReason``): remove it from view (in `window`, when
    /// the block came from a switch there; `nil` otherwise) and drop what the app holds for it (sessions,
    /// caches, in-flight work), then answer ``BlockAccountResult/success``. Called once per block, when the
    /// account goes from unblocked to blocked, never while the runtime holds a lock.
    ///
    /// The runtime refuses the account's switches, admissions and data whatever the answer.
    /// ``BlockAccountResult/failed``, or no answer within ``RuntimeSettings/delegateTimeout``, means the app
    /// could not drop the account's state: the runtime then calls ``restartApplication()`` (a service drains
    /// and exits, and its supervisor starts it clean). The default answers `.success`.
    func blockAccount(
        _ account: Identity, reason: BlockAccountReason, window: WindowID?,
        completionHandler: @escaping @Sendable (BlockAccountResult) -> Void)

    /// The runtime needs a fresh start of the app's state (e.g. a policy that requires it was removed).
    ///
    /// A library never terminates its host process. Return `true` when the app handled it: an app tears down
    /// and rebuilds its account-bound state; a service drains and exits so that its supervisor (systemd,
    /// Kubernetes) restarts it. Return `false` (the default) and the runtime only posts
    /// `Notification.Name.restartRequired` and the ``PolicyEvent/restartRequired`` event.
    func restartApplication() -> Bool
}

extension PolicyDelegate {
    public func identitySwitchRequired(
        _ identity: Identity, reason: IdentitySwitchReason, window: WindowID,
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void
    ) {
        completionHandler(.failed)
    }

    public func addIdentity(_ identity: Identity, completionHandler: @escaping @Sendable (AddIdentityResult) -> Void) {
        completionHandler(.failed)
    }

    public func wipeData(forAccount account: Identity) -> Bool { false }

    public func blockAccount(
        _ account: Identity, reason: BlockAccountReason, window: WindowID?,
        completionHandler: @escaping @Sendable (BlockAccountResult) -> Void
    ) {
        completionHandler(.success)
    }

    public func restartApplication() -> Bool { false }
}
