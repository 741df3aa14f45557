import Foundation
import IdentityProtection
import IdentityRuntime

/// The policy module's entry point (the analog of `IntuneMAMPolicyManager`): who the managed (primary) user
/// is, which identity each window shows, the identity-switch handshakes, policies, and the selective wipe.
///
/// ```swift
/// let manager = PolicyManager.shared
/// manager.delegate = appDelegate
/// manager.registerConditionalLaunchCheck(PINCheck())
/// let result = await manager.setUIPolicyIdentity("alice@contoso.com", for: .main)   // runs the PIN check
/// if result == .success, manager.policy.isSaveToAllowed(for: .localDrive) { enableExport() }
/// ```
///
/// ## Process-wide and isolated managers
/// ``shared`` is bound to the process: it keeps the UI identities in `IdentityContext` (so that
/// `IdentityContext.effectiveUIIdentity` sees them) and, in single-identity mode, sets
/// `IdentityContext.processIdentity` to the primary user. An instance made with ``init(settings:policySource:fileProtection:keyStore:scope:notificationCenter:)``
/// is ``Scope/isolated`` by default: it keeps its own levels and posts to its own notification center, so
/// tests and embedded uses never touch process-wide state.
///
/// ## Managed identities
/// Only one identity is managed at a time: the ``primaryUser`` (the enrolled account). Another account is
/// "claimed" when the policy source has a policy for it or the enrollment manager has it registered; a switch
/// to a claimed account is ``SwitchIdentityResult/notAllowed``. Every other account is unmanaged.
///
/// Thread-safe. The manager never calls out (delegate, checks, completion handlers, notifications) while it
/// holds its lock.
public final class PolicyManager: Sendable {
    /// Where a manager keeps the identities it manages.
    public enum Scope: Sendable, Hashable {
        /// In `IdentityContext` (UI identities, and the process identity in single-identity mode).
        case processWide
        /// In the manager only.
        case isolated
    }

    /// The process-wide manager.
    public static let shared = PolicyManager(scope: .processWide, notificationCenter: .default)

    /// Where this manager keeps identities.
    public let scope: Scope

    struct State {
        var settings: RuntimeSettings
        var primaryUser: Identity?
        var processIdentity: Identity?
        var keyWindow: WindowID = .main
        var delegate: (any PolicyDelegate)?
        var checks: [any ConditionalLaunchCheck] = []
        var policySource: (any PolicySource)?
        var fileProtection: FileProtectionManager?
        var keyStore: (any KeyStore)?
        var claimedAccounts: Set<Identity> = []
        var switches = UISwitchStateMachine()
    }

    let state: LockedValue<State>
    let broadcaster: PolicyEventBroadcaster

    /// A manager.
    ///
    /// - Parameters:
    ///   - settings: behaviour; when ``RuntimeSettings/policyDirectory`` is set and `policySource` is `nil`,
    ///     a ``DirectoryPolicySource`` reads it and polls it every ``RuntimeSettings/policyPollInterval``.
    ///   - policySource: where policies come from.
    ///   - fileProtection: what the selective wipe deletes files with (its key store is destroyed too).
    ///   - keyStore: keys to destroy on a wipe when there is no `fileProtection` (or in addition to its store).
    ///   - scope: ``Scope/isolated`` (the default for instances) or ``Scope/processWide``.
    ///   - notificationCenter: where notifications go; `nil`: a private center for isolated managers,
    ///     `NotificationCenter.default` for process-wide ones.
    public init(
        settings: RuntimeSettings = RuntimeSettings(), policySource: (any PolicySource)? = nil,
        fileProtection: FileProtectionManager? = nil, keyStore: (any KeyStore)? = nil,
        scope: Scope = .isolated, notificationCenter: NotificationCenter? = nil
    ) {
        self.scope = scope
        broadcaster = PolicyEventBroadcaster(
            notificationCenter: notificationCenter ?? (scope == .processWide ? .default : NotificationCenter()))
        var source = policySource
        if source == nil, let directory = settings.policyDirectory {
            let directorySource = DirectoryPolicySource(directory: directory, pollInterval: settings.policyPollInterval)
            directorySource.startPolling()
            source = directorySource
        }
        state = LockedValue(State(settings: settings, policySource: source, fileProtection: fileProtection, keyStore: keyStore))
        source?.setChangeHandler { [weak self] in self?.send(.policyDidChange) }
    }

    // MARK: Configuration

    /// The settings in force.
    public var settings: RuntimeSettings {
        get { state.withLock { $0.settings } }
        set { state.withLock { $0.settings = newValue } }
    }

    /// Answers the runtime-initiated handshakes. Held strongly; set `nil` to release it.
    public var delegate: (any PolicyDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// Where policies come from. Setting it installs the manager's change handler on the new source.
    public var policySource: (any PolicySource)? {
        get { state.withLock { $0.policySource } }
        set {
            let previous = state.withLock { state in
                defer { state.policySource = newValue }
                return state.policySource
            }
            previous?.setChangeHandler(nil)
            newValue?.setChangeHandler { [weak self] in self?.send(.policyDidChange) }
            send(.policyDidChange)
        }
    }

    /// What the selective wipe deletes files with. Settable after creation, because a
    /// `FileProtectionManager` usually takes this manager as its `ManagedIdentityPolicy`.
    public var fileProtection: FileProtectionManager? {
        get { state.withLock { $0.fileProtection } }
        set { state.withLock { $0.fileProtection = newValue } }
    }

    /// Keys destroyed on a wipe besides those of ``fileProtection``'s key store.
    public var keyStore: (any KeyStore)? {
        get { state.withLock { $0.keyStore } }
        set { state.withLock { $0.keyStore = newValue } }
    }

    /// The checks run, in order, before a managed identity is shown.
    public var conditionalLaunchChecks: [any ConditionalLaunchCheck] {
        get { state.withLock { $0.checks } }
        set { state.withLock { $0.checks = newValue } }
    }

    /// Appends `check` to ``conditionalLaunchChecks``.
    public func registerConditionalLaunchCheck(_ check: any ConditionalLaunchCheck) {
        state.withLock { $0.checks.append(check) }
    }

    /// Events as an `AsyncSequence`: every event sent after this call, until the stream is dropped. The
    /// stream buffers the newest 1,024 events.
    public var events: AsyncStream<PolicyEvent> {
        broadcaster.stream()
    }

    /// The notification center this manager posts to.
    public var notificationCenter: NotificationCenter {
        broadcaster.notificationCenter
    }

    // MARK: Accounts

    /// The enrolled (managed) account, or `nil`.
    public var primaryUser: Identity? {
        state.withLock { $0.primaryUser }
    }

    /// Makes `identity` the primary (managed) user, or with `nil` removes it. The ``EnrollmentManager`` calls
    /// it; apps that enroll accounts themselves may too. In single-identity mode the process identity follows.
    /// ``Identity/unmanaged`` is treated as `nil`.
    public func setPrimaryUser(_ identity: Identity?) {
        let identity = identity.flatMap { $0.isUnmanaged ? nil : $0 }
        let changed = state.withLock { state -> Bool in
            guard state.primaryUser != identity else { return false }
            state.primaryUser = identity
            if !state.settings.multiIdentity {
                state.processIdentity = identity
                if scope == .processWide { IdentityContext.processIdentity = identity }
            }
            return true
        }
        guard changed else { return }
        send(.primaryUserDidChange(identity))
        send(.policyDidChange)
    }

    /// Whether `identity` is the managed account (the primary user). `nil` and ``Identity/unmanaged`` are not.
    public func isIdentityManaged(_ identity: Identity?) -> Bool {
        guard let identity, !identity.isUnmanaged else { return false }
        return state.withLock { $0.primaryUser == identity }
    }

    /// Marks accounts another component manages (registered for enrollment but not enrolled): switching to
    /// them is not allowed. For the ``EnrollmentManager``.
    func setClaimedAccounts(_ accounts: Set<Identity>) {
        state.withLock { $0.claimedAccounts = accounts }
    }

    enum Classification { case none, unmanaged, managed, otherManaged }

    func classify(_ identity: Identity?) -> Classification {
        guard let identity else { return .none }
        guard !identity.isUnmanaged else { return .unmanaged }
        let (primary, claimed, source) = state.withLock { ($0.primaryUser, $0.claimedAccounts, $0.policySource) }
        if primary == identity { return .managed }
        if claimed.contains(identity) || source?.policy(for: identity) != nil { return .otherManaged }
        return .unmanaged
    }

    // MARK: Identities

    /// The process identity: `IdentityContext.processIdentity` for ``Scope/processWide``, the manager's own
    /// otherwise. In single-identity mode it follows ``primaryUser``.
    public var processIdentity: Identity? {
        get {
            scope == .processWide ? IdentityContext.processIdentity : state.withLock { $0.processIdentity }
        }
        set {
            state.withLock { state in
                state.processIdentity = newValue
                if scope == .processWide { IdentityContext.processIdentity = newValue }
            }
        }
    }

    /// The window `nil` stands for (`IdentityContext.keyWindow` for ``Scope/processWide``).
    public var keyWindow: WindowID {
        get { scope == .processWide ? IdentityContext.keyWindow : state.withLock { $0.keyWindow } }
        set {
            if scope == .processWide { IdentityContext.keyWindow = newValue } else { state.withLock { $0.keyWindow = newValue } }
        }
    }

    func resolve(_ window: WindowID?) -> WindowID {
        window ?? keyWindow
    }

    /// The UI identity of `window` (`nil`: the key window).
    public func uiPolicyIdentity(for window: WindowID? = nil) -> Identity? {
        let window = resolve(window)
        return scope == .processWide
            ? IdentityContext.uiPolicyIdentity(for: window)
            : state.withLock { $0.switches.identity(for: window) }
    }

    /// The identity UI work for `window` runs under (DESIGN §2): the thread identity; else, on the main thread,
    /// the window's UI identity; else the process identity.
    public func effectiveUIIdentity(for window: WindowID? = nil) -> Identity? {
        if let thread = IdentityContext.currentThreadIdentity { return thread }
        if IdentityContext.isOnMainThread, let ui = uiPolicyIdentity(for: window) { return ui }
        return processIdentity
    }

    // MARK: Policies

    /// The policy for the effective UI identity of the key window (thread, then UI on the main thread, then
    /// process identity).
    public var policy: Policy {
        policy(for: effectiveUIIdentity(for: nil))
    }

    /// The policy of `window`'s effective UI identity.
    public func policy(forWindow window: WindowID?) -> Policy {
        policy(for: effectiveUIIdentity(for: window))
    }

    /// The policy of `identity`: ``Policy/unrestricted`` for `nil`, ``Identity/unmanaged`` and every account
    /// but the primary user; for the primary user, its policy from the ``policySource``, or when there is
    /// none, ``Policy/unrestricted`` (``Policy/locked(for:)`` if ``RuntimeSettings/policyRequired``).
    public func policy(for identity: Identity?) -> Policy {
        guard let identity, !identity.isUnmanaged else { return .unrestricted }
        let (primary, source, required) = state.withLock { ($0.primaryUser, $0.policySource, $0.settings.policyRequired) }
        guard primary == identity else { return .unrestricted }
        if let policy = source?.policy(for: identity) { return policy }
        return required ? .locked(for: identity) : .unrestricted
    }

    // MARK: Events

    func send(_ event: PolicyEvent) {
        broadcaster.send(event, object: self)
    }

    /// Clears every identity this manager holds and supersedes switches in flight (they complete
    /// `.canceled`). For tests of the process-wide manager.
    package func resetForTesting() {
        let superseded = state.withLock { state in
            state.primaryUser = nil
            state.processIdentity = nil
            state.keyWindow = .main
            state.delegate = nil
            state.checks = []
            state.claimedAccounts = []
            state.settings = RuntimeSettings()
            return state.switches.reset()
        }
        for flight in superseded {
            flight.attempt.cancel()
            flight.completion.deliver(.canceled)
        }
        if scope == .processWide { IdentityContext.resetAllLevels() }
    }
}

extension PolicyManager: ManagedIdentityPolicy {
    /// `IdentityProtection`'s view: the primary user is managed.
    public func isManaged(_ identity: Identity) -> Bool {
        isIdentityManaged(identity)
    }

    /// Whether the policy of `identity` requires encryption at rest.
    public func isFileEncryptionRequired(for identity: Identity) -> Bool {
        isIdentityManaged(identity) && policy(for: identity).isFileEncryptionRequired
    }
}
