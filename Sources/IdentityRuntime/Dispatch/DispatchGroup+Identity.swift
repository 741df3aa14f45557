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
        file: StaticString = #fileID,
        line: UInt = #line,
        execute work: @escaping @Sendable () -> Void
    ) {
        let unit = IdentitySnapshot.capture(flow: flow).prepare(site: SubmitSite(fileID: file, line: line), work)
        notify(qos: qos, flags: flags, queue: queue.underlying, execute: unit.run)
    }
}
