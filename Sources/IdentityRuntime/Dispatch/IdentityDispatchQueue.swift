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

    /// libdispatch's queue behind ``underlying``, for the block-free `async` path: set only for the global
    /// queues, whose object libdispatch's public C API returns.
    let direct: DirectQueue?

    /// Wraps an existing queue. Blocks submitted through the wrapper carry identity; blocks submitted to
    /// `queue` directly do not.
    public init(wrapping queue: DispatchQueue) {
        self.underlying = queue
        self.direct = nil
    }

    /// The global concurrent queue of `qos`, with its libdispatch object for the block-free `async` path.
    private init(global qos: DispatchQoS.QoSClass) {
        self.underlying = .global(qos: qos)
        self.direct = DirectQueue(global: qos)
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

    /// The global concurrent queue of the given quality of service, wrapped (one wrapper per class, made
    /// once).
    public static func global(qos: DispatchQoS.QoSClass = .default) -> IdentityDispatchQueue {
        switch qos {
        case .background: globalQueues.background
        case .utility: globalQueues.utility
        case .default: globalQueues.standard
        case .userInitiated: globalQueues.userInitiated
        case .userInteractive: globalQueues.userInteractive
        case .unspecified: globalQueues.unspecified
        @unknown default: IdentityDispatchQueue(global: qos)
        }
    }

    private struct GlobalQueues: Sendable {
        let background = IdentityDispatchQueue(global: .background)
        let utility = IdentityDispatchQueue(global: .utility)
        let standard = IdentityDispatchQueue(global: .default)
        let userInitiated = IdentityDispatchQueue(global: .userInitiated)
        let userInteractive = IdentityDispatchQueue(global: .userInteractive)
        let unspecified = IdentityDispatchQueue(global: .unspecified)
    }

    private static let globalQueues = GlobalQueues()

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
        let snapshot = IdentitySnapshot.capture(flow: flow)
        // The common submission, unless strict mode or a fault must wrap the unit: one frame holds the work
        // and is the binding it runs under; on a global queue it is the context of dispatch_async_f (no
        // block), elsewhere the whole context of the one block the overlay copies.
        if group == nil, flags.isEmpty, qos == .unspecified, !DiagnosticsScope.isActive {
            let frame = IdentityFrame(unit: snapshot.identity, work: work)
            if let direct {
                direct.async(frame)
            } else {
                underlying.async { frame.runUnit() }
            }
            return
        }
        let unit = snapshot.prepare(site: SubmitSite(fileID: file, line: line), work)
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
    /// the caller's). Returns what `work` returns and throws what it throws, with its type.
    ///
    /// `work` runs in a scope of its own, also when libdispatch runs it on the calling thread (every queue
    /// but, on Apple platforms, the main one): an unscoped `setCurrentThreadIdentity(_:)` inside it lasts
    /// until it returns, a `Task {}` created after such a change keeps the changed identity, and the caller
    /// (with the tasks it created before) never observes it.
    @inlinable
    public func sync<T, Failure: Error>(
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow = .inherit,
        execute work: () throws(Failure) -> T
    ) throws(Failure) -> T {
        // Inlined so the result and error handling are specialized in the caller; the identity work is
        // one non-generic call.
        var result: T?
        var failure: Failure?
        runSynchronously(flags: flags, flow: flow) {
            do throws(Failure) {
                result = try work()
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return result.unsafelyUnwrapped
    }

    /// Runs `body` on the queue, waiting, under the identity `flow` gives it now.
    @usableFromInline
    func runSynchronously(flags: DispatchWorkItemFlags, flow: IdentityFlow, _ body: () -> Void) {
        let identity = flow.resolvedIdentity
        if flags.isEmpty {
            // The overlay's non-generic sync: the result handling its generic one adds is done by the
            // inlined `sync` already. The block gets a frame of its own even on the calling thread (see `sync`).
            underlying.sync(execute: { IdentityContext.withThreadIdentity(identity, operation: body) })
        } else {
            underlying.sync(flags: flags) { IdentityContext.withThreadIdentity(identity, operation: body) }
        }
    }

    /// Runs a work item on the queue and waits for it; it runs under the identity captured at its creation.
    public func sync(execute workItem: IdentityWorkItem) {
        underlying.sync(execute: workItem.dispatchWorkItem)
    }

    /// Submits `work` and waits until it has run, under the identity `flow` gives it at the call.
    ///
    /// Where the platform has `DispatchQueue.asyncAndWait` it is used; elsewhere (Linux) this is `sync`,
    /// which has the same observable contract: `work` has run when the call returns.
    public func asyncAndWait<T, Failure: Error>(
        flow: IdentityFlow = .inherit,
        execute work: () throws(Failure) -> T
    ) throws(Failure) -> T {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        var result: Result<T, Failure>?
        #if canImport(Darwin)
        if #available(macOS 10.14, iOS 12, tvOS 12, watchOS 5, *) {
            withoutActuallyEscaping(work) { work in
                underlying.asyncAndWait {
                    result = Result { () throws(Failure) -> T in try snapshot.run(work) }
                }
            }
            return try result.unsafelyUnwrapped.get()
        }
        #endif
        underlying.sync {
            result = Result { () throws(Failure) -> T in try snapshot.run(work) }
        }
        return try result.unsafelyUnwrapped.get()
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
