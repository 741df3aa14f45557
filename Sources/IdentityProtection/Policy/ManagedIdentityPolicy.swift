import IdentityRuntime

/// Decides which identities get protection: the seam between this module and the policy module.
///
/// `IdentityPolicy`'s `PolicyManager` implements it from the enrolled user's policy; without the policy
/// module, use ``StaticManagedIdentityPolicy``.
///
/// ``Identity/unmanaged`` (`""`) is never managed, whatever an implementation returns: the managers check
/// that themselves.
public protocol ManagedIdentityPolicy: Sendable {
    /// Whether `identity` is a managed account: data protected for it is encrypted.
    func isManaged(_ identity: Identity) -> Bool

    /// Whether files owned by `identity` must be encrypted at rest. Consulted only for managed identities.
    func isFileEncryptionRequired(for identity: Identity) -> Bool
}
