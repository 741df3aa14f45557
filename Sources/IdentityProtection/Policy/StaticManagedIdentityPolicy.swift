import IdentityRuntime

/// The default ``ManagedIdentityPolicy``: a set of managed identities held in memory, and one switch for
/// file encryption. Thread-safe; the set may change at any time (enrolment, wipe).
///
/// ```swift
/// let policy = StaticManagedIdentityPolicy(managed: ["alice@contoso.com"], fileEncryptionRequired: true)
/// policy.isManaged("ALICE@contoso.com")   // true: identities compare case-insensitively
/// ```
public final class StaticManagedIdentityPolicy: ManagedIdentityPolicy {
    private struct State {
        var managed: Set<Identity>
        var fileEncryptionRequired: Bool
    }

    private let state: LockedValue<State>

    /// A policy managing exactly `managed` (``Identity/unmanaged`` is ignored).
    public init(managed: Set<Identity> = [], fileEncryptionRequired: Bool = true) {
        state = LockedValue(State(managed: managed.filter { !$0.isUnmanaged }, fileEncryptionRequired: fileEncryptionRequired))
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

    /// Starts managing `identity` (no effect for ``Identity/unmanaged``).
    public func addManagedIdentity(_ identity: Identity) {
        guard !identity.isUnmanaged else { return }
        _ = state.withLock { $0.managed.insert(identity) }
    }

    /// Stops managing `identity`.
    public func removeManagedIdentity(_ identity: Identity) {
        _ = state.withLock { $0.managed.remove(identity) }
    }

    public func isManaged(_ identity: Identity) -> Bool {
        !identity.isUnmanaged && state.withLock { $0.managed.contains(identity) }
    }

    public func isFileEncryptionRequired(for identity: Identity) -> Bool {
        isManaged(identity) && state.withLock { $0.fileEncryptionRequired }
    }
}
