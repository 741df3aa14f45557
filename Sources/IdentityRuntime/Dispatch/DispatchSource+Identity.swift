import Dispatch

extension DispatchSourceProtocol {
    /// Sets the event handler so that every firing runs under the identity `flow` gives it **when the
    /// handler is set**: `.inherit` opts in to the setter's thread identity, `.suppress` runs it with no
    /// identity, `.assign(x)` with `x`. Each firing leaves the worker thread as it found it.
    ///
    /// The plain `setEventHandler(handler:)` stays available and carries nothing.
    public func setEventHandler(
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow,
        file: StaticString = #fileID,
        line: UInt = #line,
        handler: @escaping @Sendable () -> Void
    ) {
        let unit = IdentitySnapshot.capture(flow: flow)
            .prepare(site: SubmitSite(fileID: file, line: line), runs: .any, handler)
        setEventHandler(qos: qos, flags: flags, handler: unit.run)
    }

    /// Sets the cancel handler under the identity `flow` gives it when it is set.
    public func setCancelHandler(
        qos: DispatchQoS = .unspecified,
        flags: DispatchWorkItemFlags = [],
        flow: IdentityFlow,
        file: StaticString = #fileID,
        line: UInt = #line,
        handler: @escaping @Sendable () -> Void
    ) {
        let unit = IdentitySnapshot.capture(flow: flow)
            .prepare(site: SubmitSite(fileID: file, line: line), runs: .any, handler)
        setCancelHandler(qos: qos, flags: flags, handler: unit.run)
    }
}
