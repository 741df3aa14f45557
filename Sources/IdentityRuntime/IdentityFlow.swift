/// What identity a submitted unit of work runs under, chosen at submission.
///
/// Every submission API of the runtime takes a `flow:` parameter defaulting to ``inherit``.
public enum IdentityFlow: Sendable, Hashable {
    /// The submitter's current thread identity, captured at the moment the propagation table names
    /// (`nil` stays `nil`).
    case inherit
    /// No thread identity: the unit runs with `nil`, hiding any identity of the submitter or worker.
    case suppress
    /// The given identity, whatever the submitter's is.
    case assign(Identity)

    /// The identity this flow gives a unit submitted from the current thread or task, now.
    public var resolvedIdentity: Identity? {
        switch self {
        case .inherit: return IdentityContext.currentThreadIdentity
        case .suppress: return nil
        case let .assign(identity): return identity
        }
    }
}
