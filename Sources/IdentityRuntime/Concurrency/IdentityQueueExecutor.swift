import Dispatch

/// A `SerialExecutor` and `TaskExecutor` that runs Swift jobs on an ``IdentityDispatchQueue``: actors
/// and tasks share the queue's serialization with the blocks submitted to it, so code protected by a queue
/// can move to an actor one type at a time.
///
/// ## Propagation
/// A job observes the thread identity of **its own task** (task-locals travel with jobs), never the
/// identity of whatever code enqueued it or of the block that ran before it on the queue:
///
/// | mechanism | captured | observed |
/// |---|---|---|
/// | an actor whose `unownedExecutor` is this executor | the calling task's identity, at task creation | the calling task's identity, before and after every suspension |
/// | `withTaskExecutorPreference(executor)`, `Task(executorPreference: executor)` | at task creation | inherited, as for any `Task {}` |
/// | blocks submitted to ``queue`` | at submission | the submitter's (the queue's own rule) |
///
/// ```swift
/// let queue = IdentityDispatchQueue(label: "accounts")
/// let executor = IdentityQueueExecutor(queue: queue)
///
/// actor Ledger {
///     let executor: IdentityQueueExecutor
///     nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
///     func post(_ entry: Entry) { save(entry, as: IdentityContext.currentThreadIdentity) }  // the caller's task
/// }
/// ```
///
/// > Warning: The queue must be serial (`IdentityDispatchQueue(label:)` without `.concurrent`): every job,
/// > an actor's or a preferred task's, runs isolated to this executor.
public final class IdentityQueueExecutor: SerialExecutor, TaskExecutor, Sendable {
    /// The queue the jobs run on.
    public let queue: IdentityDispatchQueue

    /// An executor running jobs on `queue`.
    public init(queue: IdentityDispatchQueue) {
        self.queue = queue
    }

    /// An executor on a new serial queue labelled `label`.
    public convenience init(label: String) {
        self.init(queue: IdentityDispatchQueue(label: label))
    }

    /// Runs `job` on the queue. The job is submitted raw: its own task's identity applies, and the worker
    /// thread is left as it was found.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.underlying.async {
            job.runSynchronously(
                isolatedTo: self.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
        }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// This executor as a task executor (a task preference), for `Task(executorPreference:)` and `withTaskExecutorPreference`.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Stops the process unless the caller runs on the queue (for `assumeIsolated`).
    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue.underlying))
    }
}
