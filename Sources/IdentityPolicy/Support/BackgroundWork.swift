import IdentityRuntime

/// The work a manager starts on its own behalf, outside any caller's task: a delegate's answer awaited for a
/// completion-handler call, the conditional-launch checks of an identity switch, an admission for a
/// completion handler, an enrollment retry or check-in. Each piece is a task the manager keeps until it ends,
/// so that the end of the manager's `run()` (a service shutting down) can wait for what is still in flight:
/// nothing the manager started before then outlives the service that owns it.
///
/// Nothing here cancels: a piece runs to its end (a delegate call is bounded by `delegateTimeout`); the manager
/// ends identity switches in flight through their own state, as a newer call supersedes them.
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

    /// Waits until every piece in flight now has ended (pieces started meanwhile are not waited for: callers
    /// loop while ``count`` is not zero, doing what must precede each round).
    func waitForCurrent() async {
        let tasks = state.withLock { Array($0.tasks.values) }
        for task in tasks { await task.value }
    }

    private func finished(_ id: UInt64) {
        _ = state.withLock { $0.tasks.removeValue(forKey: id) }
    }
}
