import IdentityProtection
import IdentityRuntime

extension PolicyManager {
    /// Whether data owned by `source` may go to `target` (<doc:ServiceBoundary>): be re-owned by it, or be read by code
    /// whose effective file identity is `target` (`nil`: code with no identity).
    ///
    /// False before the policy source has loaded (``PolicySource/hasLoaded``), unless neither side names an
    /// account; false whenever either side is undecided (a policy document that may govern it cannot be read). False whenever `source` or `target` is a blocked account, managed or not (``blockedAccounts``): nothing
    /// goes to or comes from a blocked account, not even unmanaged data. Otherwise true when:
    /// - the data is unmanaged: `source` is `nil`, `Identity.unmanaged` or an account not managed here;
    /// - `target` is `source`;
    /// - `source`'s policy lets it go there (``Policy/dataTransfer``): ``DataTransferLevel/sameTenant`` (the
    ///   default) to managed accounts of the same tenant (``tenant(for:)``), ``DataTransferLevel/managedAccounts``
    ///   to any managed account, ``DataTransferLevel/any`` to anyone; ``DataTransferLevel/none`` to no one.
    public func isDataTransferAllowed(from source: Identity?, to target: Identity?) -> Bool {
        state.withLock { $0.isDataTransferAllowed(from: source, to: target) }
    }

    /// `IdentityProtection`'s access check, the one rule behind every protected read and write:
    /// - before the policy source has loaded (``PolicySource/hasLoaded``), every access to owned data:
    ///   `ProtectionError.policyUnavailable(reason:)` (115), since any account may be managed;
    /// - an undecided owner (or recipient), whose policy document cannot be read (<doc:AccountsAndPolicies>):
    ///   `ProtectionError.policyUnavailable(reason:)` (115), for creating, reading, modifying and transferring alike;
    /// - a blocked owner (or recipient): `ProtectionError.accountBlocked(identity:reason:)`
    ///   (109), for creating, reading and transferring alike;
    /// - a read by an effective file identity that may not see the owner's data
    ///   (``isDataTransferAllowed(from:to:)``), while ``RuntimeSettings/dataIsolation`` is on:
    ///   `ProtectionError.accessDenied(identity:reader:)` (108);
    /// - a transfer (re-owning) that ``isDataTransferAllowed(from:to:)`` does not allow: `ProtectionError.accessDenied(identity:reader:)` (108).
    public func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        state.withLock { $0.refusal(of: access, to: owner) }
    }
}
