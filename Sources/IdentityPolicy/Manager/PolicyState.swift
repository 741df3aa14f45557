import IdentityProtection
import IdentityRuntime

/// Everything a ``PolicyManager`` knows, as one value kept under the manager's lock.
///
/// The manager is a coordinator: each public call takes its lock once, asks this value (and the state machines
/// it holds) what to do, and carries out what they answer (delegate calls, completion handlers, events,
/// tasks) after the lock is released. The state machines:
/// - ``AccountIndex``: accounts and tenants, which are managed and under which policy, which are claimed;
/// - ``BlockRegistry``: the causes of each account's block, but its policy's;
/// - ``AdmissionStateMachine``: admission passes, denials and checks running;
/// - ``UISwitchStateMachine``: the identities each window shows and the switches in flight.
///
/// Every policy decision is a method of this type (`PolicyState+Decisions.swift`); none reads anything but
/// this value, so each is tested without a manager.
struct PolicyState {
    /// Where the identity levels live; the only place a manager's scope changes what it does.
    let scope: PolicyManager.Scope
    var settings: RuntimeSettings
    /// The process identity of an isolated manager (a process-wide one keeps it in `IdentityContext`).
    private(set) var processIdentity: Identity?
    /// The key window of an isolated manager (a process-wide one keeps it in `IdentityContext`).
    private(set) var keyWindow: WindowID = .main
    var delegate: (any PolicyDelegate)?
    var checks: [any ConditionalLaunchCheck] = []
    var policySource: (any PolicySource)?
    /// What the selective wipe deletes files with (its storage; the file manager itself weakly).
    var fileProtection: FileProtectionLink?
    var keyStore: (any KeyStore)?
    /// What sees admissions and wipes (``PolicyManager/observer``).
    var observer: (any PolicyManagerObserver)?
    var switches = UISwitchStateMachine()
    var accounts = AccountIndex()
    var blocks = BlockRegistry()
    var admission = AdmissionStateMachine()
    /// Whether the policy source has loaded (``PolicySource/hasLoaded``); until then, operations on owned
    /// data are refused with `ProtectionError.policyUnavailable`.
    var policiesLoaded = true
    /// The problems the policy source reported with the policies in force (``PolicyManager/policyErrors``).
    var policyErrors: [PolicyDocumentError] = []
    /// The errors already logged, so that a poll that finds the same error again does not log it again.
    var loggedPolicyErrors: Set<PolicyDocumentError> = []
    /// Tickets of policy reloads: each takes one before it reads the source, and a reload applies only if
    /// no reload with a later ticket has applied (a slow, stale read never overwrites a newer one).
    var reloadTicketsIssued: UInt64 = 0
    var reloadTicketApplied: UInt64 = 0

    init(scope: PolicyManager.Scope, settings: RuntimeSettings) {
        self.scope = scope
        self.settings = settings
    }

    // MARK: Identity levels

    /// Sets the process identity, in `IdentityContext` too for a process-wide manager (under the manager's
    /// lock, so that concurrent changes reach `IdentityContext` in the order they were made here).
    mutating func setProcessIdentity(_ identity: Identity?) {
        processIdentity = identity
        if scope == .processWide { IdentityContext.processIdentity = identity }
    }

    /// Sets the key window: `IdentityContext`'s for a process-wide manager, this value's otherwise.
    mutating func setKeyWindow(_ window: WindowID) {
        if scope == .processWide { IdentityContext.keyWindow = window } else { keyWindow = window }
    }

    /// Publishes the UI identity ``switches`` holds for `window` to `IdentityContext`, for a process-wide
    /// manager (an isolated one keeps it in ``switches`` only).
    func publishUIIdentity(for window: WindowID) {
        if scope == .processWide { IdentityContext.setUIPolicyIdentity(switches.identity(for: window), for: window) }
    }

    /// Forgets every identity, account, block and admission (not the policy source, the file manager or the key
    /// store); returns the switches in flight, superseded. For tests of the process-wide manager.
    mutating func reset() -> [UISwitchStateMachine.InFlight] {
        processIdentity = nil
        keyWindow = .main
        delegate = nil
        checks = []
        settings = RuntimeSettings()
        accounts = AccountIndex()
        _ = accounts.setPolicies(policySource?.policies ?? .empty)
        blocks = BlockRegistry()
        admission = AdmissionStateMachine()
        if scope == .processWide { IdentityContext.resetAllLevels() }
        return switches.reset()
    }
}
