import Synchronization

/// Strict mode: the runtime checks every asynchronous unit of work it wraps and reports what is wrong.
///
/// Off by default; on with ``isEnabled`` or by starting the process with `IDENTITY_STRICT=1`
/// (`IDENTITY_STRICT=fatal` also makes every report fatal; `0`, `false`, `no`, `off` or empty mean off, in any
/// case). While it is on, every unit submitted through
/// ``IdentityDispatchQueue``, ``IdentityWorkItem``, ``IdentityOperationQueue`` or a wrapped source handler
/// records its submit site (`#fileID:#line`) and is checked:
/// - at entry, the unit observes the identity captured for it at submission (else ``RuntimeIssue/misattributed(site:expected:observed:)``);
/// - at exit, the worker thread's identity is what it was before the unit (else ``RuntimeIssue/identityLeaked(site:before:after:)``);
/// - a block or operation runs exactly once; a unit released without running is reported with its site
///   (``RuntimeIssue/unitNeverRan(site:)``, ``RuntimeIssue/unitRanTwice(site:)``); work items may be
///   performed more than once, as in Dispatch, but one never performed is reported;
/// - a thread that ends with an identity from the unscoped setter outside any scope, and, at
///   ``reportUnresetThreadIdentities()`` (called at exit when the environment switch is used), every thread
///   still holding one, are reported (``RuntimeIssue/unscopedIdentityNotReset(thread:identity:)``).
///
/// Reports go to the handler set with ``setReportHandler(_:)`` (default: standard error) and, when
/// ``isFatal`` is set, stop the process. Units submitted while strict mode is off are not tracked; turning
/// it on costs one small allocation per unit.
public enum IdentityStrictMode {
    private static let enabled = Atomic<Bool>(environmentSetting != nil)
    private static let fatal = Atomic<Bool>(environmentSetting == "fatal")

    /// `IDENTITY_STRICT`, lowercased; `nil` when unset or off (empty, `0`, `false`, `no`, `off`).
    static var environmentSetting: String? {
        parseSetting(getEnvironment("IDENTITY_STRICT"))
    }

    /// The meaning of an `IDENTITY_STRICT` value: `nil` (off) for none, an empty value, `0`, `false`, `no` or
    /// `off` in any case; otherwise the value lowercased (`fatal` makes reports fatal; anything else is on).
    static func parseSetting(_ value: String?) -> String? {
        guard let value = value?.lowercased(), !["", "0", "false", "no", "off"].contains(value) else { return nil }
        return value
    }

    /// Whether units submitted from now on, anywhere in the process, are tracked and checked.
    public static var isEnabled: Bool {
        get { enabled.load(ordering: .relaxed) }
        set { enabled.store(newValue, ordering: .relaxed) }
    }

    /// Whether every report stops the process (for tests and CI).
    public static var isFatal: Bool {
        get { fatal.load(ordering: .relaxed) }
        set { fatal.store(newValue, ordering: .relaxed) }
    }

    /// Sends every report to `handler` (nil: standard error). Returns nothing; the previous handler is
    /// replaced. Reports can arrive on any thread.
    public static func setReportHandler(_ handler: (@Sendable (RuntimeIssue) -> Void)?) {
        RuntimeIssues.setHandler(handler)
    }

    /// Runs `operation` with strict mode on for the units it submits (directly, or from tasks it creates),
    /// whatever ``isEnabled`` says; other code in the process is unaffected. Its error passes through with
    /// its type.
    @discardableResult
    public static func checking<R, Failure: Error>(_ operation: () throws(Failure) -> R) throws(Failure) -> R {
        try DiagnosticsScope.with(strict: true, operation)
    }

    /// Runs `operation` with strict mode on for the units it submits (directly, or from tasks it creates).
    /// Its error passes through with its type.
    @discardableResult
    public static func checking<R, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ operation: () async throws(Failure) -> R
    ) async throws(Failure) -> R {
        try await DiagnosticsScope.with(strict: true, isolation: isolation, operation)
    }

    /// Reports every thread that still holds an identity set with the unscoped setter outside any scope, and
    /// returns how many there were.
    @discardableResult
    public static func reportUnresetThreadIdentities() -> Int {
        let leftovers = ThreadRootSlot.heldIdentities()
        for (thread, identity) in leftovers {
            RuntimeIssues.report(.unscopedIdentityNotReset(thread: thread, identity: identity))
        }
        return leftovers.count
    }
}
