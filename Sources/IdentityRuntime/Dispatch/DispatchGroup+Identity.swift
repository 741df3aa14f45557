import Dispatch

extension DispatchGroup {
    /// Schedules `work` on `queue` once every block of the group has finished. The block observes the
    /// identity `flow` gives it **at this call** (by default the notifier's thread identity), not the
    /// identities of the group's blocks.
    public func notify(
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        queue: IdentityDispatchQueue,
        flow: IdentityFlow = .inherit,
        execute work: @escaping @Sendable () -> Void
    ) {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        notify(qos: qos, flags: flags, queue: queue.underlying) { snapshot.run(work) }
    }
}
