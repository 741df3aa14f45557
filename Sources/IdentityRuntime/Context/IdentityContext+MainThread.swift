extension IdentityContext {
    /// Whether the caller runs "on the main thread" in the sense of DESIGN §2 (the process's main thread or a
    /// block of the main queue). For the policy module's handshake rules.
    package static var isOnMainThread: Bool {
        MainThread.isCurrent
    }
}
