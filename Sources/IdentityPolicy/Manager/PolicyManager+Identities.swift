import IdentityRuntime

/// The identity levels (<doc:AccountsAndPolicies>): where a manager reads them. A ``PolicyManager/Scope/processWide``
/// manager keeps them in `IdentityContext`, so they are read there, without the manager's lock; an isolated
/// one keeps them in its state. Every write goes through ``PolicyState``, which publishes it to
/// `IdentityContext` for a process-wide manager.
extension PolicyManager {
    /// The process identity: `IdentityContext.processIdentity` for ``Scope/processWide``, the manager's own
    /// otherwise. In single-identity mode it follows ``primaryUser``.
    public var processIdentity: Identity? {
        get { scope == .processWide ? IdentityContext.processIdentity : state.withLock { $0.processIdentity } }
        set { state.withLock { $0.setProcessIdentity(newValue) } }
    }

    /// The window `nil` stands for (`IdentityContext.keyWindow` for ``Scope/processWide``).
    public var keyWindow: WindowID {
        get { scope == .processWide ? IdentityContext.keyWindow : state.withLock { $0.keyWindow } }
        set { state.withLock { $0.setKeyWindow(newValue) } }
    }

    func resolve(_ window: WindowID?) -> WindowID {
        window ?? keyWindow
    }

    /// The UI identity of `window` (`nil`: the key window).
    public func uiPolicyIdentity(for window: WindowID? = nil) -> Identity? {
        let window = resolve(window)
        return scope == .processWide
            ? IdentityContext.uiPolicyIdentity(for: window)
            : state.withLock { $0.switches.identity(for: window) }
    }

    /// The identity UI work for `window` runs under, by the runtime's one rule (`IdentityContext.effectiveUIIdentity(for:)`)
    /// over this manager's levels: the thread identity; else, on the main thread, the window's UI identity;
    /// else the process identity.
    public func effectiveUIIdentity(for window: WindowID? = nil) -> Identity? {
        IdentityContext.effectiveUIIdentity(uiIdentity: uiPolicyIdentity(for: window), processIdentity: processIdentity)
    }
}
