extension IdentityContext {
    /// Whether the caller runs "on the main thread" in the sense of the resolution rules: the process's main
    /// thread, or a block of the main queue (on Linux, an `async` main program and the `MainActor` run the
    /// main queue on a worker thread, where `Thread.isMainThread` is false). This is the test
    /// ``effectiveUIIdentity(for:)`` and the policy module's handshake rules use.
    public static var isOnMainThread: Bool {
        MainThread.isCurrent
    }
}
