import Dispatch

/// A dispatch work item that runs under the identity captured **when it is created**, wherever it is
/// later submitted (through ``IdentityDispatchQueue`` or a raw `DispatchQueue` via ``dispatchWorkItem``) or
/// performed directly.
///
/// ```swift
/// let item = IdentityWorkItem { save() }          // captures the creator's identity now
/// IdentityDispatchQueue.global().async(execute: item)
/// ```
public final class IdentityWorkItem: @unchecked Sendable {
    // Safety: both stored properties are immutable; DispatchWorkItem is thread-safe (it is not marked
    // Sendable in every Dispatch overlay).
    /// The identity-carrying `DispatchWorkItem`; submitting it to a raw queue still carries the identity.
    public let dispatchWorkItem: DispatchWorkItem

    /// The identity captured at creation.
    public let snapshot: IdentitySnapshot

    private let tracker: UnitTracker?

    /// Creates a work item capturing the identity `flow` gives it now.
    public init(
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow = .inherit,
        file: StaticString = #fileID,
        line: UInt = #line,
        block: @escaping @Sendable () -> Void
    ) {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        let unit = snapshot.prepare(site: SubmitSite(fileID: file, line: line), runs: .atLeastOnce, block)
        self.snapshot = snapshot
        self.tracker = unit.tracker
        self.dispatchWorkItem = DispatchWorkItem(qos: qos, flags: flags, block: unit.run)
    }

    /// Runs the item on the current thread, under the identity captured at creation.
    public func perform() {
        dispatchWorkItem.perform()
    }

    /// Waits until the item has run.
    public func wait() {
        dispatchWorkItem.wait()
    }

    /// Waits until the item has run or `timeout` passes.
    public func wait(timeout: DispatchTime) -> DispatchTimeoutResult {
        dispatchWorkItem.wait(timeout: timeout)
    }

    /// Waits until the item has run or the wall-clock `wallTimeout` passes.
    public func wait(wallTimeout: DispatchWallTime) -> DispatchTimeoutResult {
        dispatchWorkItem.wait(wallTimeout: wallTimeout)
    }

    /// Schedules `execute` on `queue` once the item has run; it observes the identity `flow` gives it at
    /// this call (by default the caller's), not the item's.
    public func notify(
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        queue: IdentityDispatchQueue,
        flow: IdentityFlow = .inherit,
        file: StaticString = #fileID,
        line: UInt = #line,
        execute: @escaping @Sendable () -> Void
    ) {
        let unit = IdentitySnapshot.capture(flow: flow).prepare(site: SubmitSite(fileID: file, line: line), execute)
        dispatchWorkItem.notify(qos: qos, flags: flags, queue: queue.underlying, execute: unit.run)
    }

    /// Cancels the item if it has not started.
    public func cancel() {
        tracker?.markCancelled()
        dispatchWorkItem.cancel()
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { dispatchWorkItem.isCancelled }
}
