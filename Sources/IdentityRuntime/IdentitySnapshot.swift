/// A thread identity captured now, to run work under later, anywhere: the one mechanism every wrapper of
/// the runtime is built on, and the way to carry an identity through code the runtime does not wrap
/// (callback APIs, raw `Thread`s, `Task.detached`).
///
/// ```swift
/// let snapshot = IdentitySnapshot.capture()
/// legacyAPI.fetch { result in
///     snapshot.run { save(result) }   // runs under the identity captured above
/// }
/// Task.detached { await snapshot.run { await sync() } }
/// ```
///
/// ``run(_:)->_`` binds the captured identity in a fresh scope: the unit observes exactly the captured identity
/// (`nil` hides whatever the thread had), may change it for its own remainder with
/// `setCurrentThreadIdentity(_:)`, and leaves the thread exactly as it found it, on return and on throw.
public struct IdentitySnapshot: Sendable, Hashable {
    /// The captured thread identity.
    public let identity: Identity?

    /// A snapshot of a given identity.
    public init(identity: Identity?) {
        self.identity = identity
    }

    /// Captures the current thread's or task's identity, as changed by `flow`.
    public static func capture(flow: IdentityFlow = .inherit) -> IdentitySnapshot {
        IdentitySnapshot(identity: flow.resolvedIdentity)
    }

    /// Runs `body` synchronously under the captured identity; its error passes through with its type.
    @discardableResult
    public func run<R, Failure: Error>(_ body: () throws(Failure) -> R) throws(Failure) -> R {
        try IdentityContext.withThreadIdentity(identity, operation: body)
    }

    /// ``run(_:)->_`` for a body that returns nothing, so that `snapshot.run { Task { ... } }` resolves without
    /// annotations wherever the call's own value is not used.
    public func run<Failure: Error>(_ body: () throws(Failure) -> Void) throws(Failure) {
        try IdentityContext.withThreadIdentity(identity, operation: body)
    }

    /// Runs `body` under the captured identity, across suspension points; child tasks inherit it. Its error
    /// passes through with its type.
    @discardableResult
    public func run<R, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws(Failure) -> R
    ) async throws(Failure) -> R {
        try await IdentityContext.withThreadIdentity(identity, isolation: isolation, operation: body)
    }

    /// Returns `work` prepared to run later, once, under this snapshot: for code that hands work to an
    /// executor the runtime does not wrap (an event loop, a C callback, a custom scheduler).
    ///
    /// Calling the result runs `work` in a fresh scope under the captured identity and leaves the thread
    /// exactly as it found it, like every unit of ``IdentityDispatchQueue``. It costs one allocation: the
    /// returned closure's context is the binding the unit runs under. While strict mode is on
    /// (``IdentityStrictMode``), the unit records `file` and `line` and is checked like the runtime's own:
    /// at entry it must observe the captured identity, at exit the thread must be as it was, and it must
    /// run exactly once (calling the result twice, or never, is reported).
    ///
    /// ```swift
    /// let unit = IdentitySnapshot.capture().makeUnit { audit.record(IdentityContext.effectiveFileIdentity) }
    /// eventLoop.execute(unit)
    /// ```
    public consuming func makeUnit(
        file: StaticString = #fileID, line: UInt = #line, _ work: consuming @escaping @Sendable () -> Void
    ) -> @Sendable () -> Void {
        // The common case, as in IdentityDispatchQueue.async: no strict mode, no fault, so no tracker and no
        // PreparedUnit; the frame is the returned closure's whole context.
        guard DiagnosticsScope.isActive else {
            let frame = IdentityFrame(unit: identity, work: work)
            return { frame.runUnit() }
        }
        return prepare(site: SubmitSite(fileID: file, line: line), work).run
    }

    /// A unit of work prepared for later execution under this snapshot: the one place where every wrapper's
    /// asynchronous units are built, so strict mode and fault injection apply to all of them alike.
    package struct PreparedUnit: Sendable {
        /// Runs the work under the snapshot (with strict mode's checks when it was on at preparation).
        package let run: @Sendable () -> Void
        /// Strict mode's record of the unit, when strict mode was on.
        package let tracker: UnitTracker?
    }

    /// Prepares `work` to run later under this snapshot.
    package func prepare(
        site: SubmitSite, runs: UnitTracker.Runs = .exactlyOnce, _ work: @escaping @Sendable () -> Void
    ) -> PreparedUnit {
        let (strict, fault) = DiagnosticsScope.current
        guard strict || fault != .none else {
            guard runs == .exactlyOnce else { return PreparedUnit(run: { self.run(work) }, tracker: nil) }
            // One object is the closure context and the frame the unit binds.
            let frame = IdentityFrame(unit: identity, work: work)
            return PreparedUnit(run: { frame.runUnit() }, tracker: nil)
        }
        let tracker = strict ? UnitTracker(site: site, expected: identity, runs: runs) : nil
        let body: @Sendable () -> Void = {
            let scope = fault == .captureAtRun ? IdentitySnapshot.capture() : self
            scope.run {
                tracker?.checkEntry()
                work()
            }
            if fault == .skipRestore, let identity = self.identity {
                ThreadRootSlot.set(identity)
            }
        }
        return PreparedUnit(
            run: {
                if let tracker { tracker.run(body) } else { body() }
            },
            tracker: tracker)
    }
}
