import IdentityRuntime

/// Records the identities code observes at chosen points, from any thread or task, for assertions after
/// the work is done.
///
/// ```swift
/// let recorder = IdentityRecorder()
/// IdentityContext.withThreadIdentity("alice@contoso.com") {
///     queue.async { recorder.record("upload") }
/// }
/// // later
/// #expect(recorder.threadIdentities(for: "upload") == ["alice@contoso.com"])
/// ```
public final class IdentityRecorder: Sendable {
    /// What was observed at one ``record(_:)`` call.
    public struct Observation: Sendable, Equatable {
        /// The label given to ``IdentityRecorder/record(_:)``.
        public let label: String
        /// The thread identity at the call.
        public let thread: Identity?
        /// The effective file identity at the call.
        public let file: Identity?
        /// The effective UI identity at the call.
        public let ui: Identity?
    }

    private let storage = LockedValue<[Observation]>([])

    /// An empty recorder.
    public init() {}

    /// Records the current thread identity and the effective file and UI identities under `label`.
    public func record(_ label: String = "") {
        let observation = Observation(
            label: label,
            thread: IdentityContext.currentThreadIdentity,
            file: IdentityContext.effectiveFileIdentity,
            ui: IdentityContext.effectiveUIIdentity)
        storage.withLock { $0.append(observation) }
    }

    /// Everything recorded so far, in the order the records happened.
    public var observations: [Observation] { storage.withLock { $0 } }

    /// The thread identities recorded under `label`, in order.
    public func threadIdentities(for label: String) -> [Identity?] {
        observations.filter { $0.label == label }.map(\.thread)
    }

    /// Forgets everything recorded.
    public func reset() {
        storage.withLock { $0.removeAll() }
    }
}
