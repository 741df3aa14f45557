import Dispatch
import Foundation

/// Something scheduled that can be called off.
public protocol ScheduledWork: Sendable {
    /// Calls the work off; it does not run if it has not started. Calling it again does nothing.
    func cancel()
}

/// When the ``EnrollmentManager`` retries and checks in: injectable so tests control time.
public protocol EnrollmentScheduler: Sendable {
    /// Runs `work` once after `seconds`, unless cancelled first.
    func schedule(after seconds: TimeInterval, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork
}

/// The default scheduler: a global dispatch queue's `asyncAfter` (wall-clock time).
public struct DispatchEnrollmentScheduler: EnrollmentScheduler {
    /// The default scheduler.
    public init() {}

    public func schedule(after seconds: TimeInterval, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let item = DispatchWorkItem(block: work)
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .nanoseconds(Int(seconds.clampedNanoseconds)), execute: item)
        return DispatchScheduledWork(item: item)
    }

    private struct DispatchScheduledWork: ScheduledWork, @unchecked Sendable {
        // Safety: DispatchWorkItem is thread-safe; it is only cancelled here.
        let item: DispatchWorkItem
        func cancel() { item.cancel() }
    }
}
