import IdentityRuntime
import NIOCore

/// Identity-carrying submissions to an `EventLoop`.
///
/// SwiftNIO runs a task on the loop's own thread, which has no identity: `loop.execute { }` and
/// `loop.scheduleTask(in:) { }` written as today observe `nil`, whoever submitted them. The `flow:`
/// overloads capture the submitter's thread identity (as `flow` changes it) at the call and run the task
/// under it, exactly like ``IdentityRuntime/IdentityDispatchQueue``'s `async(flow:)`:
///
/// | written today | with IdentityNIO | observed while the task runs |
/// |---|---|---|
/// | `loop.execute { }` | `loop.execute(flow: .inherit) { }` | the submitter's identity (`nil` stays `nil`) |
/// | `loop.submit { }` / `flatSubmit` | `loop.submit(flow: .inherit) { }` | the submitter's |
/// | `loop.scheduleTask(in:) { }` / `deadline:` | `loop.scheduleTask(in: .seconds(1), flow: .inherit) { }` | the scheduler's |
/// | any of them | `flow: .suppress` / `flow: .assign(x)` | `nil` / `x` |
///
/// The loop thread is left exactly as it was found when the task returns or throws: the next task on
/// the loop never sees the identity.
///
/// The generic overloads are `@inlinable` so that NIO's generic `submit`, `scheduleTask`, ... are specialized
/// for the caller's result type, as they are when called directly.
///
/// ```swift
/// IdentityContext.withThreadIdentity("alice@contoso.com") {
///     channel.eventLoop.execute(flow: .inherit) {
///         audit.record(IdentityContext.effectiveFileIdentity)   // alice@contoso.com
///     }
/// }
/// ```
extension EventLoop {
    /// Runs `task` on the loop under the identity `flow` gives it, captured now.
    ///
    /// One allocation per call beyond NIO's own (``IdentityRuntime/IdentitySnapshot/makeUnit(file:line:_:)``).
    /// While strict mode is on, the task is checked like the runtime's own units and reports carry this
    /// call's `file` and `line`.
    public func execute(
        flow: IdentityFlow, file: StaticString = #fileID, line: UInt = #line,
        _ task: consuming @escaping @Sendable () -> Void
    ) {
        execute(IdentitySnapshot.capture(flow: flow).makeUnit(file: file, line: line, task))
    }

    /// Runs `task` on the loop under the identity `flow` gives it, captured now; the future gets its result.
    @inlinable
    public func submit<T: Sendable>(
        flow: IdentityFlow, _ task: @escaping @Sendable () throws -> T
    ) -> EventLoopFuture<T> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return submit { try snapshot.run(task) }
    }

    /// Runs `task` on the loop under the identity `flow` gives it, captured now, and completes with the
    /// future it returns.
    @inlinable
    public func flatSubmit<T: Sendable>(
        flow: IdentityFlow, _ task: @escaping @Sendable () -> EventLoopFuture<T>
    ) -> EventLoopFuture<T> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return flatSubmit { snapshot.run(task) }
    }

    /// Schedules `task` for `deadline` under the identity `flow` gives it, captured now (not when it fires).
    @inlinable
    @discardableResult
    public func scheduleTask<T: Sendable>(
        deadline: NIODeadline, flow: IdentityFlow, _ task: @escaping @Sendable () throws -> T
    ) -> Scheduled<T> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return scheduleTask(deadline: deadline) { try snapshot.run(task) }
    }

    /// Schedules `task` to run after `delay` under the identity `flow` gives it, captured now.
    @inlinable
    @discardableResult
    public func scheduleTask<T: Sendable>(
        in delay: TimeAmount, flow: IdentityFlow, _ task: @escaping @Sendable () throws -> T
    ) -> Scheduled<T> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return scheduleTask(in: delay) { try snapshot.run(task) }
    }

    /// Schedules `task` to run after `delay` under the identity `flow` gives it, captured now, and
    /// completes with the future it returns.
    @inlinable
    @discardableResult
    public func flatScheduleTask<T: Sendable>(
        in delay: TimeAmount, flow: IdentityFlow, _ task: @escaping @Sendable () throws -> EventLoopFuture<T>
    ) -> Scheduled<T> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return flatScheduleTask(in: delay) { try snapshot.run(task) }
    }
}
