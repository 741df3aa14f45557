import IdentityRuntime

/// The default ``ManagedIdentityPolicy``: a set of managed identities held in memory, and one switch for
/// file encryption. Thread-safe; the set may change at any time (enrolment, wipe).
///
/// Each managed account's data is isolated (``ManagedIdentityPolicy/isolationRefusal(of:to:)``): it is read
/// only under that account's own effective file identity, never by another account, by `""` or by code with
/// no identity, and it goes to no other owner. `dataIsolation: false` is the explicit opt-out: then nothing
/// is refused while the owner is managed, as the SDK's single-identity apps expect.
///
/// ``removeManagedIdentity(_:)`` does not open an account's data: what it created while it was managed stays
/// its own (see "Recorded isolation" in <doc:DataAndFileProtection>) until a wipe or
/// ``FileProtectionManager/releaseIsolation(atPath:)``.
///
/// ```swift
/// let policy = StaticManagedIdentityPolicy(managed: ["alice@contoso.com"], fileEncryptionRequired: true)
/// policy.isManaged("ALICE@contoso.com")   // true: identities compare case-insensitively
/// ```
public final class StaticManagedIdentityPolicy: ManagedIdentityPolicy {
    private struct State {
        var managed: Set<Identity>
        var fileEncryptionRequired: Bool
        var dataIsolation: Bool
    }

    private let state: LockedValue<State>

    /// A policy managing exactly `managed` (`Identity.unmanaged` is ignored).
    ///
    /// - Parameters:
    ///   - managed: the managed identities.
    ///   - fileEncryptionRequired: whether the files of managed identities are encrypted at rest.
    ///   - dataIsolation: `true` (the default): a managed account's data is refused to every other
    ///     reader and recipient (``ProtectionError/accessDenied(identity:reader:)``, 108). `false`: nothing is
    ///     refused; every reader gets every account's plaintext.
    public init(managed: Set<Identity> = [], fileEncryptionRequired: Bool = true, dataIsolation: Bool = true) {
        state = LockedValue(State(
            managed: managed.filter { !$0.isUnmanaged }, fileEncryptionRequired: fileEncryptionRequired,
            dataIsolation: dataIsolation))
    }

    /// The identities currently managed.
    public var managedIdentities: Set<Identity> {
        state.withLock { $0.managed }
    }

    /// Whether managed identities' files must be encrypted at rest.
    public var fileEncryptionRequired: Bool {
        get { state.withLock { $0.fileEncryptionRequired } }
        set { state.withLock { $0.fileEncryptionRequired = newValue } }
    }

    /// Whether managed accounts' data is isolated (see ``init(managed:fileEncryptionRequired:dataIsolation:)``).
    public var dataIsolation: Bool {
        get { state.withLock { $0.dataIsolation } }
        set { state.withLock { $0.dataIsolation = newValue } }
    }

    /// Starts managing `identity` (no effect for `Identity.unmanaged`).
    public func addManagedIdentity(_ identity: Identity) {
        guard !identity.isUnmanaged else { return }
        _ = state.withLock { $0.managed.insert(identity) }
    }

    /// Stops managing `identity`. Data it created while managed stays readable by it alone (recorded
    /// isolation) until a wipe or ``FileProtectionManager/releaseIsolation(atPath:)``.
    public func removeManagedIdentity(_ identity: Identity) {
        _ = state.withLock { $0.managed.remove(identity) }
    }

    public func isManaged(_ identity: Identity) -> Bool {
        !identity.isUnmanaged && state.withLock { $0.managed.contains(identity) }
    }

    public func isFileEncryptionRequired(for identity: Identity) -> Bool {
        isManaged(identity) && state.withLock { $0.fileEncryptionRequired }
    }

    /// Account isolation (``ManagedIdentityPolicy/isolationRefusal(of:to:)``) unless ``dataIsolation`` is off.
    public func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        // The owner's own accesses and every creation need no lock: this runs on every read and write.
        if access.isAllowedUnderIsolation(for: owner) { return nil }
        let isolated = state.withLock { $0.dataIsolation && $0.managed.contains(owner) }
        return isolated && !owner.isUnmanaged ? access.refusalUnderIsolation(of: owner) : nil
    }
}
