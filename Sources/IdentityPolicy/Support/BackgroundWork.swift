import IdentityRuntime

/// The work a manager starts on its own behalf, outside any caller's task: a delegate's answer awaited for a
/// completion-handler call, the conditional-launch checks of an identity switch, an enrollment retry or
/// check-in. Each piece is a task the manager keeps until it ends, so that the end of the manager's `run()`
/// (a service shutting down) cancels what is still in flight and waits for it: nothing the manager started
/// outlives the service that owns it.
///
/// A piece starts under no identity: it never runs as whoever happened to trigger it (it binds the identity
/// it works for itself, as the switch checks do).
final class BackgroundWork: Sendable {
    private struct State {
        var tasks: [UInt64: Task<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = LockedValue(State())

    /// Starts `body` in a task of its own, kept until it ends.
    @discardableResult
    func start(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        // Created and recorded in one critical section: a task that ends at once removes itself only after it
        // was recorded, so a finished task never stays behind.
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            let task = IdentityContext.withThreadIdentity(nil) {
                Task { [self] in
                    await body()
                    finished(id)
                }
            }
            state.tasks[id] = task
            return task
        }
    }

    /// The number of pieces still in flight.
    var count: Int {
        state.withLock { $0.tasks.count }
    }

    /// Cancels every piece in flight and waits until each has ended, including pieces they start meanwhile.
    func cancelAll() async {
        while true {
            let tasks = state.withLock { Array($0.tasks.values) }
            if tasks.isEmpty { return }
            for task in tasks { task.cancel() }
            for task in tasks { await task.value }
        }
    }

    private func finished(_ id: UInt64) {
        _ = state.withLock { $0.tasks.removeValue(forKey: id) }
    }
}
