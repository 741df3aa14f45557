import IdentityProtection
import IdentityRuntime

extension PolicyManager {
    /// Whether data owned by `source` may go to `target` (<doc:ServiceBoundary>): be re-owned by it, or be read by code
    /// whose effective file identity is `target` (`nil`: code with no identity).
    ///
    /// False before the policy source has loaded (``PolicySource/hasLoaded``), unless neither side names an
    /// account. False whenever `source` or `target` is a blocked account, managed or not (``blockedAccounts``): nothing
    /// goes to or comes from a blocked account, not even unmanaged data. Otherwise true when:
    /// - the data is unmanaged: `source` is `nil`, `Identity.unmanaged` or an account not managed here;
    /// - `target` is `source`;
    /// - `source`'s policy lets it go there (``Policy/dataTransfer``): ``DataTransferLevel/sameTenant`` (the
    ///   default) to managed accounts of the same tenant (``tenant(of:)``), ``DataTransferLevel/managedAccounts``
    ///   to any managed account, ``DataTransferLevel/any`` to anyone; ``DataTransferLevel/none`` to no one.
    public func isDataTransferAllowed(from source: Identity?, to target: Identity?) -> Bool {
        state.withLock { state in
            // Before the policies loaded nobody knows who is managed: only unowned data goes to no identity.
            guard state.policiesLoaded else { return (source?.isUnmanaged ?? true) && (target?.isUnmanaged ?? true) }
            for side in [source, target] {
                if let side, !side.isUnmanaged, Self.blockReason(for: side, in: state) != nil { return false }
            }
            guard let source, !source.isUnmanaged else { return true }
            return Self.isTransferAllowed(from: source, to: target, in: state)
        }
    }

    static func isTransferAllowed(from source: Identity, to target: Identity?, in state: State) -> Bool {
        guard case let .managed(policy) = state.accounts.standing(of: source) else { return true }
        if target == source { return blockReason(for: source, in: state) == nil }
        if blockReason(for: source, in: state) != nil { return false }
        if let target, !target.isUnmanaged, blockReason(for: target, in: state) != nil { return false }
        switch policy.dataTransfer {
        case .none:
            return false
        case .any:
            return true
        case .managedAccounts, .sameTenant:
            guard let target, !target.isUnmanaged, state.accounts.isManaged(target) else { return false }
            return policy.dataTransfer == .managedAccounts || state.accounts.tenant(of: target) == state.accounts.tenant(of: source)
        }
    }

    /// `IdentityProtection`'s access check, the one rule behind every protected read and write:
    /// - before the policy source has loaded (``PolicySource/hasLoaded``), every access to owned data:
    ///   `ProtectionError.policyUnavailable(reason:)` (115), since any account may be managed;
    /// - a blocked owner (or recipient): `ProtectionError.accountBlocked(identity:reason:)`
    ///   (109), for creating, reading and transferring alike;
    /// - a read by an effective file identity that may not see the owner's data
    ///   (``isDataTransferAllowed(from:to:)``), while ``RuntimeSettings/dataIsolation`` is on:
    ///   `ProtectionError.accessDenied(identity:reader:)` (108);
    /// - a transfer (re-owning) that ``isDataTransferAllowed(from:to:)`` does not allow: `ProtectionError.accessDenied(identity:reader:)` (108).
    public func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        state.withLock { state -> ProtectionError? in
            guard state.policiesLoaded else {
                return .policyUnavailable(reason: "the policy source has not loaded yet: \(owner.debugDescription) may be managed")
            }
            if let reason = Self.blockReason(for: owner, in: state) {
                return .accountBlocked(identity: owner, reason: reason.rawValue)
            }
            switch access {
            case .create:
                return nil
            case let .read(reader), let .modify(writer: reader):
                // A blocked account reads and changes no owned data, managed or not (as isDataTransferAllowed
                // answers false for it), isolation on or off; the owner's own data included (109 above when
                // the owner is the blocked one).
                if let reader, !reader.isUnmanaged, Self.blockReason(for: reader, in: state) != nil {
                    return .accessDenied(identity: owner, reader: reader)
                }
                // Whoever may not read an account's data may not modify it.
                guard state.settings.dataIsolation, !Self.isTransferAllowed(from: owner, to: reader, in: state) else { return nil }
                return .accessDenied(identity: owner, reader: reader)
            case let .transfer(recipient):
                if let recipient, !recipient.isUnmanaged, let reason = Self.blockReason(for: recipient, in: state) {
                    return .accountBlocked(identity: recipient, reason: reason.rawValue)
                }
                return Self.isTransferAllowed(from: owner, to: recipient, in: state) ? nil : .accessDenied(identity: owner, reader: recipient)
            }
        }
    }
}
