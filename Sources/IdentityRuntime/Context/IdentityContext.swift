internal import CIdentityTask
import Foundation
import Synchronization

/// Where the runtime keeps identities, and how it resolves the identity a piece of work runs under.
///
/// ## Levels
/// - **Process identity** (``processIdentity``): process-wide.
/// - **UI identity** (``uiPolicyIdentity(for:)``): per window, applies to UI work on the main thread only;
///   it never affects file work. Set by the policy module's identity-switch handshakes. "On the main
///   thread" means the process's main thread or a block of the main queue (main-actor code included),
///   wherever the platform runs the main queue.
/// - **Thread identity** (``currentThreadIdentity``): the identity of the current thread *or task*.
///
/// Each level holds `Identity?`: `nil` is "unset" and falls through to the next level;
/// ``Identity/unmanaged`` (`""`) is a value that stops the fall-through.
///
/// ## Effective identities
/// - ``effectiveUIIdentity``: thread identity if non-nil; else, on the main thread, the window's UI identity
///   if non-nil; else the process identity.
/// - ``effectiveFileIdentity``: thread identity if non-nil; else the process identity.
///
/// ## Propagation of the thread identity
/// | mechanism | captured | observed while it runs |
/// |---|---|---|
/// | ``IdentityDispatchQueue`` `async`, `asyncAfter`, barrier, `async(group:)` | at submission | the submitter's thread identity (nil stays nil) |
/// | `sync`, `asyncAndWait`, `concurrentPerform` | at the call | the caller's, every iteration |
/// | ``IdentityWorkItem`` | at creation | the creator's, wherever it is later submitted or performed |
/// | group `notify` through the wrapper | at `notify` | the notifier's |
/// | ``IdentityOperationQueue`` (operation, block, `addOperations`, barrier) | at enqueue | the enqueuer's |
/// | `Task {}`, `async let`, task-group children | at creation | inherited, also inside a wrapped block |
/// | `Task.detached`, raw `DispatchQueue`, raw `Thread` | nothing | no thread identity, unless carried with ``IdentitySnapshot`` |
/// | a timer or dispatch source handler through the wrapper | at handler set | opt-in: the setter's |
/// | `flow: .suppress` / `flow: .assign(x)` on any submission | — | nil / `x` |
/// | actor calls on any executor, `Task.immediate`, `Task(executorPreference:)`, `MainActor.run` | at task creation | the calling task's |
/// | ``IdentityChannel`` `message.run` / `forEach` | at the send | the sender's |
///
/// The full table, with cancellation handlers, streams and Foundation's run loop and notifications, is in
/// <doc:IdentitiesAndPropagation>.
///
/// Every wrapper is built on one mechanism, ``IdentitySnapshot``: capture at the moment in the table, then
/// run the unit in a fresh scope. When a wrapped unit ends (returns or throws), the worker thread's identity
/// is exactly what it was before.
///
/// ```swift
/// IdentityContext.withThreadIdentity("alice@contoso.com") {
///     queue.async {
///         // runs as alice@contoso.com, and so does this task:
///         Task { await upload(IdentityContext.effectiveFileIdentity) }
///     }
/// }
/// ```
///
/// > Note: Inside async code the thread identity lives in a task-local: change it only with the scoped
/// > ``withThreadIdentity(_:isolation:operation:)``. The unscoped ``setCurrentThreadIdentity(_:)`` is `noasync`.
public enum IdentityContext {
    /// The innermost scope's binding; its frame is `nil` outside every scope and wrapped unit.
    /// (A `TaskLocal` of its own rather than the `@TaskLocal` wrapper, so the inlinable scope can bind it.)
    @usableFromInline
    static let bindingLocal = TaskLocal(wrappedValue: FrameBinding(nil))

    /// The innermost scope's frame; `nil` outside every scope and wrapped unit.
    static var frame: IdentityFrame? {
        bindingLocal.get().frame
    }

    private static let uiState = LockedValue(UIState())

    private struct UIState {
        var keyWindow: WindowID = .main
        var identities: [WindowID: Identity] = [:]
    }

    // MARK: Process identity

    /// The process-wide identity, the last level of every resolution. Thread-safe; reading it takes no
    /// lock (one atomic load).
    ///
    /// In single-identity mode the policy module sets it to the enrolled (primary) user; in multi-identity
    /// mode it starts `nil` and the app sets it.
    public static var processIdentity: Identity? {
        get { ProcessIdentityStore.identity }
        set { ProcessIdentityStore.set(newValue) }
    }

    // MARK: Thread identity

    /// The identity of the current thread or task, or `nil` when none is set.
    ///
    /// Inside a scope or wrapped unit it is the scope's identity, including a change made in that scope with
    /// ``setCurrentThreadIdentity(_:)``. Outside every scope it is what ``setCurrentThreadIdentity(_:)`` set
    /// on this thread, and `nil` in a task that inherited none (a detached task, for example).
    public static var currentThreadIdentity: Identity? {
        if let frame { return frame.identity }
        // The root value is almost always nil; then the task check is skipped.
        guard let root = ThreadRootSlot.identity else { return nil }
        return isInsideTask ? nil : root
    }

    /// Runs `operation` with `identity` as the thread identity, then restores the previous one.
    ///
    /// `nil` hides any outer identity for the duration. A `Task {}` created inside inherits `identity`.
    /// Restoration happens on return and on throw. The error `operation` throws passes through with its
    /// type: a closure declared `throws(ProtectionError)` makes this call throw `ProtectionError`.
    @discardableResult
    @inlinable
    public static func withThreadIdentity<R, Failure: Error>(
        _ identity: Identity?,
        operation: () throws(Failure) -> R
    ) throws(Failure) -> R {
        let frame = IdentityFrame(synchronous: identity)
        defer { frame.deactivate() }
        return try bindingLocal.withValue(FrameBinding(frame), typed: operation)
    }

    /// ``withThreadIdentity(_:operation:)->_`` for a body that returns nothing.
    ///
    /// The same scope; it exists so that a body whose last statement creates a task
    /// (`withThreadIdentity(x) { Task { ... } }`) resolves without annotations wherever the call's own value
    /// is not used.
    @inlinable
    public static func withThreadIdentity<Failure: Error>(
        _ identity: Identity?,
        operation: () throws(Failure) -> Void
    ) throws(Failure) {
        let frame = IdentityFrame(synchronous: identity)
        defer { frame.deactivate() }
        try bindingLocal.withValue(FrameBinding(frame), typed: operation)
    }

    /// Runs `operation` with `identity` as the task's thread identity, across suspension points and actor
    /// hops, then restores the previous one. Child tasks and `Task {}` created inside inherit it. The error
    /// `operation` throws passes through with its type.
    @discardableResult @inlinable
    public static func withThreadIdentity<R, Failure: Error>(
        _ identity: Identity?,
        isolation: isolated (any Actor)? = #isolation,
        operation: () async throws(Failure) -> R
    ) async throws(Failure) -> R {
        try await bindingLocal.withValue(
            FrameBinding(IdentityFrame(asynchronous: identity)), isolation: isolation, typed: operation)
    }

    /// Sets the thread identity without a scope (the legacy API).
    ///
    /// - Inside a wrapped unit or a synchronous ``withThreadIdentity(_:operation:)->_`` scope, the change lasts
    ///   for the rest of that unit or scope only; afterwards the thread is back to what it was. Work
    ///   submitted and tasks created after the change observe it.
    /// - Outside every scope (a raw thread, the main thread of a legacy app) it sets the thread's identity
    ///   until it is set again. Wrapped submissions from this thread capture it; a `Task {}` created
    ///   here does not inherit it, because Swift binds task-locals only in scopes: prefer
    ///   ``withThreadIdentity(_:operation:)->_`` there.
    /// - Called from synchronous code running inside a Swift task, outside any synchronous scope, it changes
    ///   nothing and reports a runtime issue: use the async ``withThreadIdentity(_:isolation:operation:)``.
    ///   That includes a task started with `Task.immediate` inside a scope or unit: its first part runs on the
    ///   scope's thread, but its change never reaches the scope that created it.
    @available(*, noasync, message: "inside async code the thread identity is a task-local: use withThreadIdentity(_:operation:)")
    public static func setCurrentThreadIdentity(_ identity: Identity?) {
        if let frame {
            guard frame.acceptsUnscopedChange else {
                RuntimeIssues.report(.unscopedChangeInTask(identity))
                return
            }
            frame.setOverride(identity)
            return
        }
        guard !isInsideTask else {
            RuntimeIssues.report(.unscopedChangeInTask(identity))
            return
        }
        ThreadRootSlot.set(identity)
    }

    // MARK: UI identity

    /// The window that `nil` stands for in every `for window:` parameter. Starts as ``WindowID/main``.
    public static var keyWindow: WindowID {
        get { uiState.withLock { $0.keyWindow } }
        set { uiState.withLock { $0.keyWindow = newValue } }
    }

    /// The UI identity of `window` (`nil`: the key window), or `nil` when none is set.
    public static func uiPolicyIdentity(for window: WindowID? = nil) -> Identity? {
        uiState.withLock { state in state.identities[window ?? state.keyWindow] }
    }

    /// Sets the UI identity of `window` (`nil`: the key window). For the policy module's handshakes.
    package static func setUIPolicyIdentity(_ identity: Identity?, for window: WindowID? = nil) {
        uiState.withLock { state in state.identities[window ?? state.keyWindow] = identity }
    }

    // MARK: Effective identities

    /// The identity UI work runs under for the key window; see ``effectiveUIIdentity(for:)``.
    public static var effectiveUIIdentity: Identity? {
        effectiveUIIdentity(for: nil)
    }

    /// The identity UI work for `window` runs under: the thread identity if non-nil; else, on the main
    /// thread, the window's UI identity if non-nil; else the process identity; else `nil`.
    public static func effectiveUIIdentity(for window: WindowID?) -> Identity? {
        effectiveUIIdentity(uiIdentity: uiPolicyIdentity(for: window), processIdentity: processIdentity)
    }

    /// The effective-UI rule itself, over levels kept elsewhere (a policy manager of its own keeps a UI
    /// identity per window and a process identity apart from this type's): the calling thread's identity if
    /// non-nil; else, on the main thread, `uiIdentity` if non-nil; else `processIdentity`. Both levels are
    /// read only when the rule needs them, the thread identity first.
    @inlinable
    package static func effectiveUIIdentity(
        uiIdentity: @autoclosure () -> Identity?, processIdentity: @autoclosure () -> Identity?
    ) -> Identity? {
        if let thread = currentThreadIdentity { return thread }
        // The window lookup is cheap; the main-thread test (a main-queue specific) is not, so it comes last.
        if let ui = uiIdentity(), isOnMainThread { return ui }
        return processIdentity()
    }

    /// The identity file work runs under: the thread identity if non-nil; else the process identity; else
    /// `nil`. The UI identity never takes part.
    public static var effectiveFileIdentity: Identity? {
        currentThreadIdentity ?? processIdentity
    }

    // MARK: Helpers

    /// Whether the caller runs inside a Swift task.
    package static var isInsideTask: Bool {
        identity_current_task() != nil
    }

    /// Clears every level. For tests in this package.
    package static func resetAllLevels() {
        processIdentity = nil
        uiState.withLock { $0 = UIState() }
    }
}
