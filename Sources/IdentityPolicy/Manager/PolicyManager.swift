import Foundation
import IdentityProtection
import IdentityRuntime

/// The policy module's entry point (the analog of `IntuneMAMPolicyManager`): which accounts are managed and
/// under which policy, which are blocked, which identities each window shows, the identity-switch
/// handshakes, and the selective wipe.
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
/// ## Managed, claimed, blocked and unmanaged accounts
/// Any number of accounts are managed at once, each under its own policy: every enrolled account, and every
/// account the ``policySource`` has a policy for (its own document, or its tenant's). An account belongs to
/// the tenant it was registered or enrolled with (``registerAccount(_:tenantID:objectID:)``), else to the
/// domain of its name. ``primaryUser`` is the first enrolled account: the default account of single-identity
/// mode.
///
/// ``RuntimeSettings/maxManagedAccounts`` gives the device model of the SDK's first versions: only enrolled
/// accounts are managed, at most that many. Another account with a policy, or registered for enrollment
/// and not enrolled yet, is *claimed* (managed elsewhere): its policy here is ``Policy/unrestricted`` and a
/// switch to it is ``SwitchIdentityResult/notAllowed``.
///
/// A managed account can be blocked (``blockedAccounts``, ``blockReason(for:)``): a switch to it is not
/// allowed, and its data is refused. Every other account is unmanaged and gets ``Policy/unrestricted``.
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

    let state: LockedValue<PolicyState>
    let broadcaster: PolicyEventBroadcaster
    /// What the manager started on its own (delegate answers, switch checks): ended with ``run()``.
    let backgroundWork = BackgroundWork()

    /// A manager.
    ///
    /// The initializer starts nothing in the background: polling belongs to ``run()``, which the service or
    /// app that owns the manager runs.
    ///
    /// - Parameters:
    ///   - settings: behaviour; when ``RuntimeSettings/policyDirectory`` is set and `policySource` is `nil`,
    ///     a ``DirectoryPolicySource`` reads it before this initializer returns; ``run()`` reads it again every
    ///     ``RuntimeSettings/policyPollInterval``. A directory that cannot be read yet leaves the manager
    ///     refusing operations on owned data (`ProtectionError.policyUnavailable`) until a later read
    ///     (``run()``'s, or ``reloadPolicies(timeout:)``) succeeds.
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
            notificationCenter: notificationCenter ?? (scope == .processWide ? .default : NotificationCenter()),
            isPrivate: notificationCenter == nil && scope != .processWide)
        var source = policySource
        if source == nil, let directory = settings.policyDirectory {
            // Read before the first decision; a directory not readable yet leaves the manager refusing.
            source = DirectoryPolicySource(unloadedUntilReadable: directory)
        }
        var initial = PolicyState(scope: scope, settings: settings)
        initial.policySource = source
        initial.keyStore = keyStore
        initial.fileProtection = fileProtection.map(FileProtectionLink.init)
        _ = initial.accounts.configure(limit: settings.maxManagedAccounts, policyRequired: settings.policyRequired)
        // Whether it has loaded first, then what it holds: a load that ends between the two reads is then
        // seen as "not loaded yet" (refusing), never as "loaded" with the policies of before it.
        initial.policiesLoaded = source?.hasLoaded ?? true
        _ = initial.accounts.setPolicies(source?.policies ?? .empty)
        state = LockedValue(initial)
        source?.setChangeHandler { [weak self] in self?.applyPolicySource() }
        // A load that ended before the handler was installed notified nobody: read the source once more.
        if source != nil { applyPolicySource() }
    }

    // MARK: Configuration

    /// The settings in force. Changing ``RuntimeSettings/maxManagedAccounts`` or
    /// ``RuntimeSettings/policyRequired`` re-evaluates every account; changing
    /// ``RuntimeSettings/allowedAccounts`` posts `.allowedAccountsDidChange`.
    public var settings: RuntimeSettings {
        get { state.withLock { $0.settings } }
        set {
            let (allowedChanged, transitions) = updateAccounts { state in
                let allowedChanged = state.settings.allowedAccounts != newValue.allowedAccounts
                state.settings = newValue
                return (allowedChanged, state.accounts.configure(limit: newValue.maxManagedAccounts, policyRequired: newValue.policyRequired))
            }
            if allowedChanged { send(.allowedAccountsDidChange(newValue.allowedAccounts)) }
            announce(transitions, policiesChanged: !transitions.isEmpty)
        }
    }

    /// The only accounts that may be used (`nil`: any): ``RuntimeSettings/allowedAccounts``. A switch to, or
    /// an enrollment of, another account is refused; `Identity.unmanaged` is always allowed. A change posts
    /// `.allowedAccountsDidChange`.
    public var allowedAccounts: [Identity]? {
        get { state.withLock { $0.settings.allowedAccounts } }
        set {
            var updated = settings
            updated.allowedAccounts = newValue
            settings = updated
        }
    }

    /// Answers the runtime-initiated handshakes. Held strongly; set `nil` to release it.
    public var delegate: (any PolicyDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// Where policies come from. Setting it installs the manager's change handler on the new source and reads
    /// its policies.
    public var policySource: (any PolicySource)? {
        get { state.withLock { $0.policySource } }
        set {
            let previous = state.withLock { state in
                defer { state.policySource = newValue }
                return state.policySource
            }
            previous?.setChangeHandler(nil)
            newValue?.setChangeHandler { [weak self] in self?.applyPolicySource() }
            applyPolicySource(force: true)
        }
    }

    /// What the selective wipe deletes files with. Settable after creation, because a
    /// `FileProtectionManager` usually takes this manager as its `ManagedIdentityPolicy`.
    ///
    /// The manager keeps what a wipe needs of it (its roots, key store, owners and wipe journal) for as long
    /// as it lives, and the file manager itself weakly: the file manager holds its policy, often this manager,
    /// so the two make no reference cycle. This property reads `nil` once nobody else holds the file manager;
    /// wipes still delete its files and destroy the keys in its key store.
    public var fileProtection: FileProtectionManager? {
        get { state.withLock { $0.fileProtection?.manager } }
        set {
            let link = newValue.map(FileProtectionLink.init)
            state.withLock { $0.fileProtection = link }
        }
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
    ///
    /// > Note: An isolated manager's private center has no observers before it is read here, so until then
    /// > the manager builds and posts no notification (events still reach ``events`` subscribers).
    public var notificationCenter: NotificationCenter {
        broadcaster.notificationCenter
    }

    // MARK: Accounts

    /// The primary user: the first enrolled account, or `nil`. In single-identity mode the process identity
    /// follows it.
    public var primaryUser: Identity? {
        state.withLock { $0.accounts.enrolled.first }
    }

    /// Makes `identity` the primary user: it is enrolled (managed) if it was not, and moved first. `nil` removes
    /// the primary user (the next enrolled account, if any, takes its place). With
    /// ``RuntimeSettings/maxManagedAccounts``, accounts enrolled beyond the limit are dropped, so that with a
    /// limit of 1 the new primary user replaces the old one. `Identity.unmanaged` is treated as `nil`.
    ///
    /// The ``EnrollmentManager`` enrolls accounts itself; apps that enroll accounts on their own call this.
    public func setPrimaryUser(_ identity: Identity?) {
        let identity = identity.flatMap { $0.isUnmanaged ? nil : $0 }
        updateEnrollment { enrolled, limit in
            if let identity {
                enrolled.removeAll { $0 == identity }
                enrolled.insert(identity, at: 0)
                if let limit, enrolled.count > limit { enrolled.removeLast(enrolled.count - limit) }
            } else if !enrolled.isEmpty {
                enrolled.removeFirst()
            }
        }
    }

    /// The enrolled accounts, in enrollment order (the first is ``primaryUser``).
    public var enrolledAccounts: [Identity] {
        state.withLock { $0.accounts.enrolled }
    }

    /// Enrolls `account` (appended after the accounts enrolled before it) or unenrolls it. For the
    /// ``EnrollmentManager``.
    func setEnrolled(_ account: Identity, _ enrolled: Bool) {
        updateEnrollment { accounts, _ in
            if enrolled {
                if !accounts.contains(account) { accounts.append(account) }
            } else {
                accounts.removeAll { $0 == account }
            }
        }
    }

    private func updateEnrollment(_ change: (inout [Identity], Int?) -> Void) {
        let ((previous, primary), transitions) = updateAccounts { state in
            let previous = state.accounts.enrolled.first
            var enrolled = state.accounts.enrolled
            change(&enrolled, state.settings.maxManagedAccounts)
            let changes = state.accounts.setEnrolled(enrolled)
            let primary = enrolled.first
            if primary != previous, !state.settings.multiIdentity { state.setProcessIdentity(primary) }
            return ((previous, primary), changes)
        }
        if primary != previous { send(.primaryUserDidChange(primary)) }
        announce(transitions, policiesChanged: primary != previous || !transitions.isEmpty)
    }

    /// Every managed account the manager knows: enrolled accounts, accounts with a policy document of their
    /// own, and registered accounts managed through their tenant's document; sorted by name.
    ///
    /// > Note: An account managed only through its domain's tenant document is managed
    /// > (``isIdentityManaged(_:)``) from its first request, but listed here only once the manager knows it:
    /// > register it with ``registerAccount(_:tenantID:objectID:)`` or enroll it.
    public var managedAccounts: [Identity] {
        state.withLock { $0.accounts.managedAccounts }
    }

    /// Whether `identity` is managed: enrolled, or with a policy of its own or of its tenant (with
    /// ``RuntimeSettings/maxManagedAccounts``: one of the first enrolled accounts). `nil` and
    /// `Identity.unmanaged` are not. O(1): a hash lookup in the manager's index.
    ///
    /// An undecided account (a policy document that may govern it cannot be read) counts as managed: it may
    /// be, and its data is refused (`ProtectionError.policyUnavailable`) until the document is fixed or removed.
    public func isIdentityManaged(_ identity: Identity?) -> Bool {
        guard let identity, !identity.isUnmanaged else { return false }
        return state.withLock { $0.accounts.isManaged(identity) || $0.accounts.isUndecided(identity) }
    }

    /// Records the tenant and directory object ID of `account`. An explicit tenant ID selects the tenant's
    /// policy document by ID (before the domain of the account's name); an object ID lets
    /// ``account(forObjectID:)`` find the account. Registering again replaces what was recorded.
    public func registerAccount(_ account: Identity, tenantID: TenantID? = nil, objectID: String? = nil) {
        guard !account.isUnmanaged else { return }
        let transitions = updateAccounts { state in
            ((), state.accounts.register(AccountInfo(identity: account, tenantID: tenantID, objectID: objectID)))
        }.1
        announce(transitions, policiesChanged: !transitions.isEmpty)
    }

    /// Puts `previous` back as `account`'s registration if it is still `current`: an enrollment that
    /// registered `current` ended without the account (the service refused it).
    func restoreRegistration(of account: Identity, to previous: AccountInfo?, ifStill current: AccountInfo) {
        let transitions = updateAccounts { state in
            ((), state.accounts.restoreRegistration(of: account, to: previous, ifStill: current))
        }.1
        announce(transitions, policiesChanged: !transitions.isEmpty)
    }

    /// What was registered for `account`, or `nil`.
    public func accountInfo(for account: Identity) -> AccountInfo? {
        state.withLock { $0.accounts.registry[account] }
    }

    /// The account registered with `objectID` (compared case-insensitively), or `nil`.
    public func account(forObjectID objectID: String) -> Identity? {
        state.withLock { $0.accounts.account(forObjectID: objectID) }
    }

    /// The tenant of `account`: its registered tenant ID, else the domain of its name, else, for a name
    /// without a domain (`svc-backup`), a tenant of its own: the name followed by `@` (`svc-backup@`). No
    /// domain contains `@`, so such an account shares its tenant with no other (for
    /// ``isDataTransferAllowed(from:to:)``, ``wipeData(forTenant:)``) unless it is registered with a tenant ID.
    ///
    /// ```swift
    /// manager.tenant(for: "alice@contoso.com")   // contoso.com
    /// manager.registerAccount("bob@contoso.com", tenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47")
    /// manager.tenant(for: "bob@contoso.com")     // 72f988bf-86f1-41af-91ab-2d7cd011db47
    /// manager.tenant(for: "svc-backup")          // svc-backup@
    /// ```
    /// `Identity.unmanaged` is no account; by the same rule its tenant is `@`.
    public func tenant(for account: Identity) -> TenantID {
        state.withLock { $0.accounts.tenant(of: account) }
    }

    /// Marks accounts registered for enrollment but not enrolled (claimed until their enrollment ends). For
    /// the ``EnrollmentManager``.
    func setClaimedAccounts(_ accounts: Set<Identity>) {
        let transitions = updateAccounts { state in ((), state.accounts.setPending(accounts)) }.1
        announce(transitions, policiesChanged: false)
    }

    enum Classification { case none, unmanaged, managed, otherManaged }

    func classify(_ identity: Identity?) -> Classification {
        guard let identity else { return .none }
        guard !identity.isUnmanaged else { return .unmanaged }
        switch state.withLock({ $0.accounts.standing(of: identity) }) {
        case .managed, .undecided: return .managed
        case .claimed: return .otherManaged
        case nil: return .unmanaged
        }
    }

    /// Asks the policy source to read its policies again now (``PolicySource/reload(deadline:)``) and applies
    /// what changed, posting the usual change events; returns whether anything changed. A source that reaches
    /// a database is awaited, never waited for on a thread. Decisions made meanwhile use the policies in force.
    /// - Parameter timeout: how long the source may take.
    /// - Throws: the source's ``PolicyDocumentError`` when it could not read them in time; the policies in
    ///   force stay. Without a source: nothing to read, `false`.
    @discardableResult
    public func reloadPolicies(timeout: Duration = .seconds(10)) async throws(PolicyDocumentError) -> Bool {
        guard let source = policySource else { return false }
        let changed = try await source.reload(deadline: .now + timeout)
        applyPolicySource()
        return changed
    }

    /// Re-reads the policy source (after its change handler ran). `force`: announce `.policyDidChange` even if
    /// nothing changed (a new source).
    func applyPolicySource(force: Bool = false) {
        // The source is read outside the manager's lock (a source may notify from inside `policies`), after
        // taking a ticket; `hasLoaded` before `policies` (see the initializer).
        let (ticket, source) = state.withLock { state in
            state.reloadTicketsIssued += 1
            return (state.reloadTicketsIssued, state.policySource)
        }
        let loaded = source?.hasLoaded ?? true
        let policies = source?.policies ?? .empty
        let errors = source?.errors ?? []
        let ((differences, newErrors), transitions) = updateAccounts {
            state -> (((accounts: Set<Identity>, tenants: Set<TenantID>), [PolicyDocumentError]?), AccountIndex.Changes) in
            // A reload that took a later ticket read the source later and has applied already: this one is stale.
            guard ticket > state.reloadTicketApplied else { return (((accounts: [], tenants: []), nil), [:]) }
            state.reloadTicketApplied = ticket
            let differences = policies.differences(from: state.accounts.policies)
            state.policiesLoaded = loaded
            let changedErrors = errors == state.policyErrors ? nil : errors
            if let changedErrors { state.policyErrors = changedErrors }
            return ((differences, changedErrors), state.accounts.setPolicies(policies))
        }
        if let newErrors { report(newErrors) }
        guard force || !differences.accounts.isEmpty || !differences.tenants.isEmpty || !transitions.isEmpty else { return }
        announce(transitions, policiesChanged: true, tenants: differences.tenants)
    }

    /// The problems the policy source reported when the manager last read it (``PolicySource/errors``): each
    /// document that could not be used, with its path, the position of the offending key or value, and the
    /// key. Empty when every document is good. A change is logged (to standard error, one line per error
    /// not reported before) and posted as ``PolicyEvent/policyErrorsDidChange(_:)``
    /// (`Notification.Name.policyErrorsDidChange`).
    ///
    /// A document listed here never leaves the accounts it may govern unmanaged: see <doc:AccountsAndPolicies>.
    public var policyErrors: [PolicyDocumentError] {
        state.withLock { $0.policyErrors }
    }

    /// Logs the errors not logged before (an unchanged error is not repeated at every poll) and posts the list.
    private func report(_ errors: [PolicyDocumentError]) {
        let fresh = state.withLock { state in
            let fresh = errors.filter { !state.loggedPolicyErrors.contains($0) }
            state.loggedPolicyErrors = Set(errors)
            return fresh
        }
        for error in fresh { StandardError.write("identity policy: \(error)\n") }
        send(.policyErrorsDidChange(errors))
    }

    // MARK: Policies

    /// The policy for the effective UI identity of the key window (thread, then UI on the main thread, then
    /// process identity).
    public var policy: Policy {
        policy(forWindow: nil)
    }

    /// The policy of `window`'s effective UI identity; on the main thread, when the window shows several
    /// accounts (``setUIPolicyIdentities(_:for:completionQueue:completionHandler:)``) and no thread identity is
    /// set, their combined policy.
    public func policy(forWindow window: WindowID?) -> Policy {
        if IdentityContext.currentThreadIdentity == nil, IdentityContext.isOnMainThread {
            let shown = uiPolicyIdentities(for: window)
            if shown.count > 1 { return policy(for: shown) }
        }
        return policy(for: effectiveUIIdentity(for: window))
    }

    /// The policy of `identity` (<doc:AccountsAndPolicies>): ``Policy/unrestricted`` for `nil`, `Identity.unmanaged` and
    /// every account that is not managed; for a managed account, its own policy document, else its tenant's,
    /// else ``Policy/unrestricted`` (``Policy/locked(for:)`` if ``RuntimeSettings/policyRequired``).
    ///
    /// An undecided account (a policy document that may govern it cannot be read) gets
    /// ``Policy/locked(for:)``.
    ///
    /// One hash lookup in the manager's index, under its lock; the policy source is not consulted.
    public func policy(for identity: Identity?) -> Policy {
        guard let identity, !identity.isUnmanaged else { return .unrestricted }
        return state.withLock { $0.policy(of: identity) }
    }

    /// What the service boundary reads about `account` before admission, in one critical section: its tenant
    /// (``tenant(for:)``), its policy (``policy(for:)``) and, while its policy cannot be decided,
    /// the refusal every access to its data gets (`ProtectionError.policyUnavailable`; what
    /// ``refusal(of:to:)`` answers first). One lock per request instead of three.
    package func boundaryStanding(of account: Identity) -> BoundaryStanding {
        state.withLock { $0.boundaryStanding(of: account) }
    }

    /// The most restrictive combination of the policies of `identities` (``Policy/combining(_:)``), for data
    /// or a view that belongs to several accounts at once. App-configuration values the accounts disagree on
    /// are in ``Policy/appConfigurationConflicts``.
    public func policy(for identities: some Collection<Identity>) -> Policy {
        Policy.combining(identities.map { policy(for: $0) })
    }

    // MARK: Events

    func send(_ event: @autoclosure () -> PolicyEvent) {
        broadcaster.send(event(), object: self)
    }

    /// Clears every identity this manager holds and supersedes switches in flight (they complete
    /// `.canceled`). For tests of the process-wide manager.
    package func resetForTesting() {
        state.withLock { $0.reset() }.forEach(cancel)
    }
}

extension PolicyManager: ManagedIdentityPolicy {
    /// `IdentityProtection`'s view: ``isIdentityManaged(_:)``.
    public func isManaged(_ identity: Identity) -> Bool {
        isIdentityManaged(identity)
    }

    /// Whether `identity` is managed and its policy requires encryption at rest; `true` for an undecided
    /// account (nothing of it is written in the clear; its data is refused anyway).
    public func isFileEncryptionRequired(for identity: Identity) -> Bool {
        guard !identity.isUnmanaged else { return false }
        switch state.withLock({ $0.accounts.standing(of: identity) }) {
        case let .managed(policy): return policy.isFileEncryptionRequired
        case .undecided: return true
        case .claimed, nil: return false
        }
    }

}

/// What ``PolicyManager/boundaryStanding(of:)`` reads about one account.
package struct BoundaryStanding: Sendable {
    /// The account's tenant.
    package let tenant: TenantID
    /// The account's policy.
    package let policy: Policy
    /// `ProtectionError.policyUnavailable` while the account's policy cannot be decided; `nil` otherwise.
    package let unavailable: ProtectionError?
}
