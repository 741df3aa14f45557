import Dispatch

/// A `DispatchQueue` that carries the submitter's thread identity into every block.
///
/// Propagation rules (see ``IdentityContext`` for the whole table):
/// - `async`, `asyncAfter`, barrier blocks and `async(group:)` capture the submitter's thread identity
///   **at submission**; the block observes exactly that (`nil` stays `nil`).
/// - `sync`, `asyncAndWait` and ``concurrentPerform(iterations:flow:execute:)`` capture **at the call**;
///   the block (every iteration) observes the caller's identity.
/// - ``IdentityWorkItem`` captures **at its creation**, whatever queue later runs it.
/// - Every submission takes `flow:`: `.suppress` runs the block with no identity, `.assign(x)` with `x`.
/// - A `Task {}` created inside a block inherits the block's identity.
/// - When a block returns or throws, the worker thread's identity is exactly what it was before.
///
/// ```swift
/// let queue = IdentityDispatchQueue(label: "uploads")
/// IdentityContext.withThreadIdentity("alice@contoso.com") {
///     queue.async {
///         assert(IdentityContext.currentThreadIdentity == "alice@contoso.com")
///     }
/// }
/// ```
///
/// > Note: Blocks submitted to ``underlying`` directly are raw `DispatchQueue` blocks: they carry nothing.
public struct IdentityDispatchQueue: Sendable {
    /// The queue blocks run on.
    public let underlying: DispatchQueue

    /// Wraps an existing queue. Blocks submitted through the wrapper carry identity; blocks submitted to
    /// `queue` directly do not.
    public init(wrapping queue: DispatchQueue) {
        self.underlying = queue
    }

    /// Creates a new dispatch queue, with the parameters of `DispatchQueue.init(label:...)`, and wraps it.
    public init(
        label: String,
        qos: DispatchQoS = .unspecified,
        attributes: DispatchQueue.Attributes = [],
        autoreleaseFrequency: DispatchQueue.AutoreleaseFrequency = .inherit,
        target: DispatchQueue? = nil
    ) {
        self.init(wrapping: DispatchQueue(
            label: label, qos: qos, attributes: attributes,
            autoreleaseFrequency: autoreleaseFrequency, target: target))
    }

    /// The main queue, wrapped.
    public static let main = IdentityDispatchQueue(wrapping: .main)

    /// The global concurrent queue of the given quality of service, wrapped.
    public static func global(qos: DispatchQoS.QoSClass = .default) -> IdentityDispatchQueue {
        IdentityDispatchQueue(wrapping: .global(qos: qos))
    }

    /// The label of the underlying queue.
    public var label: String { underlying.label }

    // MARK: Asynchronous submission

    /// Submits `work` to run asynchronously under the identity `flow` gives it, captured now.
    ///
    /// Use `flags: .barrier` on a concurrent queue for a barrier block; `group` associates the block with a
    /// dispatch group exactly as `DispatchQueue.async(group:...)` does.
    public func async(
        group: DispatchGroup? = nil,
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow = .inherit,
        file: StaticString = #fileID,
        line: UInt = #line,
        execute work: @escaping @Sendable () -> Void
    ) {
        let unit = IdentitySnapshot.capture(flow: flow).prepare(site: SubmitSite(fileID: file, line: line), work)
        underlying.async(group: group, qos: qos, flags: flags, execute: unit.run)
    }

    /// Submits `work` to run no earlier than `deadline`, under the identity `flow` gives it, captured now.
    public func asyncAfter(
        deadline: DispatchTime,
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow = .inherit,
        file: StaticString = #fileID,
        line: UInt = #line,
        execute work: @escaping @Sendable () -> Void
    ) {
        let unit = IdentitySnapshot.capture(flow: flow).prepare(site: SubmitSite(fileID: file, line: line), work)
        underlying.asyncAfter(deadline: deadline, qos: qos, flags: flags, execute: unit.run)
    }

    /// Submits `work` to run no earlier than the wall-clock `wallDeadline`, under the identity `flow` gives
    /// it, captured now.
    public func asyncAfter(
        wallDeadline: DispatchWallTime,
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow = .inherit,
        file: StaticString = #fileID,
        line: UInt = #line,
        execute work: @escaping @Sendable () -> Void
    ) {
        let unit = IdentitySnapshot.capture(flow: flow).prepare(site: SubmitSite(fileID: file, line: line), work)
        underlying.asyncAfter(wallDeadline: wallDeadline, qos: qos, flags: flags, execute: unit.run)
    }

    /// Submits a work item; it runs under the identity captured when the item was created.
    public func async(group: DispatchGroup? = nil, execute workItem: IdentityWorkItem) {
        if let group {
            underlying.async(group: group, execute: workItem.dispatchWorkItem)
        } else {
            underlying.async(execute: workItem.dispatchWorkItem)
        }
    }

    /// Schedules a work item after `deadline`; it runs under the identity captured at its creation.
    public func asyncAfter(deadline: DispatchTime, execute workItem: IdentityWorkItem) {
        underlying.asyncAfter(deadline: deadline, execute: workItem.dispatchWorkItem)
    }

    // MARK: Synchronous submission

    /// Runs `work` on the queue and waits for it, under the identity `flow` gives it at the call (by default
    /// the caller's). Returns what `work` returns and rethrows what it throws.
    public func sync<T>(
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow = .inherit,
        execute work: () throws -> T
    ) rethrows -> T {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        if flags.isEmpty {
            // `DispatchQueue.sync(execute: () -> Void)` is the overlay's direct path; its generic,
            // rethrowing variants add a result box and an error trampoline per call.
            return try syncReturning(snapshot, work, rescue: { throw $0 })
        }
        return try underlying.sync(flags: flags) { try snapshot.run(work) }
    }

    private func syncReturning<T>(
        _ snapshot: IdentitySnapshot, _ work: () throws -> T, rescue: (any Error) throws -> T
    ) rethrows -> T {
        var result: T?
        var failure: (any Error)?
        underlying.sync {
            do {
                result = try snapshot.run(work)
            } catch {
                failure = error
            }
        }
        if let failure { return try rescue(failure) }
        return result!
    }

    /// Runs a work item on the queue and waits for it; it runs under the identity captured at its creation.
    public func sync(execute workItem: IdentityWorkItem) {
        underlying.sync(execute: workItem.dispatchWorkItem)
    }

    /// Submits `work` and waits until it has run, under the identity `flow` gives it at the call.
    ///
    /// Where the platform has `DispatchQueue.asyncAndWait` it is used; elsewhere (Linux) this is `sync`,
    /// which has the same observable contract: `work` has run when the call returns.
    public func asyncAndWait<T>(
        flow: IdentityFlow = .inherit,
        execute work: () throws -> T
    ) rethrows -> T {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        #if canImport(Darwin)
        if #available(macOS 10.14, iOS 12, tvOS 12, watchOS 5, *) {
            return try withoutActuallyEscaping(work) { work in
                var result: Result<T, any Error>?
                underlying.asyncAndWait {
                    result = Result { try snapshot.run(work) }
                }
                return try result!.get()
            }
        }
        #endif
        return try underlying.sync { try snapshot.run(work) }
    }

    /// Runs `work` for each index in `0..<iterations`, in parallel, and waits; every iteration observes the
    /// identity `flow` gives at the call (by default the caller's).
    public static func concurrentPerform(
        iterations: Int,
        flow: IdentityFlow = .inherit,
        execute work: @Sendable (Int) -> Void
    ) {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        DispatchQueue.concurrentPerform(iterations: iterations) { index in
            snapshot.run { work(index) }
        }
    }

    // MARK: Sources

    /// Makes a timer source that fires on this queue. Set its handler with
    /// `setEventHandler(qos:flags:flow:handler:)` to choose whether it carries the setter's identity.
    public func makeTimerSource(flags: DispatchSource.TimerFlags = []) -> any DispatchSourceTimer {
        DispatchSource.makeTimerSource(flags: flags, queue: underlying)
    }
}
