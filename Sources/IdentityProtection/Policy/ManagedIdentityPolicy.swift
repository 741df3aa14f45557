import IdentityRuntime

/// Decides which identities get protection, and whether their data may be used now: the seam between this
/// module and the policy module.
///
/// `IdentityPolicy`'s `PolicyManager` implements it from each managed account's policy; without the policy
/// module, use ``StaticManagedIdentityPolicy``.
///
/// `Identity.unmanaged` (`""`) is never managed, whatever an implementation returns: the managers check
/// that themselves.
public protocol ManagedIdentityPolicy: Sendable {
    /// Whether `identity` is a managed account: data protected for it is encrypted.
    func isManaged(_ identity: Identity) -> Bool

    /// Whether files owned by `identity` must be encrypted at rest. Consulted only for managed identities.
    func isFileEncryptionRequired(for identity: Identity) -> Bool

    /// Why `access` to data owned by the managed account `owner` is refused now, or `nil` when it is allowed.
    ///
    /// Asked by ``DataProtectionManager`` and ``FileProtectionManager`` before they create data owned by
    /// `owner` and before they hand out any plaintext of data `owner` owns (decrypted or stored in the clear).
    /// Never asked for unowned data or for `Identity.unmanaged`; asked for other accounts whether or not they
    /// are managed (an implementation answers `nil` for accounts it neither manages nor blocks).
    ///
    /// The default isolates managed accounts (``isolationRefusal(of:to:)``): a managed account's data is read
    /// and modified only under that account's own effective file identity and goes to no other owner. An implementation that
    /// wants to share data between accounts says so by implementing this requirement; isolation is never
    /// something a policy must remember to switch on.
    ///
    /// > Important: This answer decides only while `owner` is managed, or for data created while it was not.
    /// > Data created while its owner was managed records that fact, and once the owner is no longer managed
    /// > the protection managers refuse it (108) to everyone but its owner after asking this requirement,
    /// > whatever it answers: see "Recorded isolation" in <doc:DataAndFileProtection>.
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError?
}

extension ManagedIdentityPolicy {
    public func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        isolationRefusal(of: access, to: owner)
    }

    /// Account isolation, the default ``refusal(of:to:)``: data owned by a managed account is refused
    /// (``ProtectionError/accessDenied(identity:reader:)``, 108) to every reader and writer but the account
    /// itself, code with no identity and `Identity.unmanaged` included, and is transferred to no other owner. Creating
    /// data for an account, and anything about an account that is not managed, is allowed.
    public func isolationRefusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        if access.isAllowedUnderIsolation(for: owner) { return nil }
        return isManaged(owner) ? access.refusalUnderIsolation(of: owner) : nil
    }
}

extension ProtectedDataAccess {
    /// Whether isolation allows this access whoever `owner` is: creating data, and the owner's own reads,
    /// modifications and keeping. Answered without asking the policy anything (the common case of every
    /// read and write, so it takes no lock).
    func isAllowedUnderIsolation(for owner: Identity) -> Bool {
        switch self {
        case .create: return true
        case let .read(caller), let .modify(writer: caller), let .transfer(to: caller): return caller == owner
        }
    }

    /// This access to data of the managed account `owner` under account isolation: only the owner itself reads
    /// it or receives it; creating is allowed.
    func refusalUnderIsolation(of owner: Identity) -> ProtectionError? {
        isAllowedUnderIsolation(for: owner) ? nil : denial(of: owner)
    }

    /// The refusal of this access to `owner`'s data, once a policy decided that its reader, writer or recipient
    /// may not have it: ``ProtectionError/accessDenied(identity:reader:)`` naming the owner and that identity.
    /// Every policy's access refusal is built here (`nil` for ``create``, which no isolation rule refuses).
    package func denial(of owner: Identity) -> ProtectionError? {
        switch self {
        case .create:
            return nil
        case let .read(reader), let .modify(writer: reader), let .transfer(to: reader):
            return .accessDenied(identity: owner, reader: reader)
        }
    }
}

/// What a protection manager is about to do with data owned by an account (see
/// ``ManagedIdentityPolicy/refusal(of:to:)``).
public enum ProtectedDataAccess: Sendable, Hashable {
    /// Create data the account owns: write or protect a file or envelope for it, or make it a file's owner.
    case create
    /// Hand plaintext of the account's data to code whose effective file identity is `reader` (`nil`: none).
    case read(reader: Identity?)
    /// Change the account's existing data for code whose effective file identity is `writer` (`nil`: none):
    /// write into, truncate, append to, replace, re-encrypt or re-own it. Whoever may not read an account's data
    /// may not modify it: the policies that ship answer it as they answer ``read(reader:)``.
    case modify(writer: Identity?)
    /// Give the account's data to `recipient` (`nil`: to no owner): a file of one account made another's.
    case transfer(to: Identity?)
}

/// The owner of existing data as the data records it, and whether the data is isolated: it was created while
/// its owner was managed (an encrypted envelope, stream or file; a plain file whose owner record says so, see
/// <doc:DataAndFileProtection#Recorded-isolation>). Read from the data, never from a parameter a caller passes.
struct RecordedOwner: Sendable, Hashable {
    /// The recorded owner (`nil`: unowned data).
    let owner: Identity?
    /// Whether the data was recorded isolated when it was created.
    let isIsolated: Bool
    /// Whether the record predates recorded isolation (a plain file's owner record written by an earlier
    /// build): it says nothing either way, so it is read as isolated while its owner is managed and upgraded
    /// then. A record written by this build always says which, so data created while its owner was not
    /// managed stays open after the owner was managed for a while.
    let isLegacy: Bool

    init(_ owner: Identity?, isolated: Bool, legacy: Bool = false) {
        self.owner = owner
        self.isIsolated = isolated && owner.map { !$0.isUnmanaged } ?? false
        self.isLegacy = legacy && !self.isIsolated && owner.map { !$0.isUnmanaged } ?? false
    }

    /// Unowned data.
    static let unowned = RecordedOwner(nil, isolated: false)
}

extension ManagedIdentityPolicy {
    /// Throws the refusal of `access` to existing data recorded as `data`, if any: the one check every read,
    /// modify and transfer path of the protection managers goes through, so no policy implementation can leave
    /// it out. Unowned data and ``Identity/unmanaged`` are never refused.
    ///
    /// The policy's ``refusal(of:to:)`` comes first (a blocked owner, a policy not loaded or not decided).
    /// Then the recorded isolation: data recorded isolated whose owner is no longer managed is refused
    /// (``ProtectionError/accessDenied(identity:reader:)``, 108) to everyone but its owner, whatever the
    /// policy answers for accounts it does not manage. While the owner is managed, the policy alone decides.
    func authorize(_ access: ProtectedDataAccess, to data: RecordedOwner) throws(ProtectionError) {
        guard let owner = data.owner, !owner.isUnmanaged else { return }
        if let refusal = refusal(of: access, to: owner) { throw refusal }
        if let refusal = recordedIsolationRefusal(of: access, to: data, owner: owner) { throw refusal }
    }

    /// ``authorize(_:to:)`` for encrypted data, with its key: the policy's refusal, then `key()`, then the
    /// recorded isolation, and the key only when all of them allow the access. The key store answers before
    /// the recorded isolation so that an owner field damaged into another name (authenticated only with the
    /// body) and a wiped account's data both get the key store's error (103), not a refusal on behalf of an
    /// account that may never have owned the data; no plaintext either way.
    func authorizedKey(
        _ access: ProtectedDataAccess, to data: RecordedOwner, key: () throws(ProtectionError) -> ProtectionKey
    ) throws(ProtectionError) -> ProtectionKey {
        guard let owner = data.owner, !owner.isUnmanaged else { return try key() }
        if let refusal = refusal(of: access, to: owner) { throw refusal }
        let found = try key()
        if let refusal = recordedIsolationRefusal(of: access, to: data, owner: owner) { throw refusal }
        return found
    }

    /// The refusal of `access` to data recorded isolated whose `owner` is no longer managed: everyone but
    /// the owner. `nil` for data not recorded isolated and while the owner is managed (its policy decides).
    private func recordedIsolationRefusal(of access: ProtectedDataAccess, to data: RecordedOwner, owner: Identity) -> ProtectionError? {
        // The owner's own accesses (the common case) need no further question.
        guard data.isIsolated, !access.isAllowedUnderIsolation(for: owner), !isManaged(owner) else { return nil }
        return access.refusalUnderIsolation(of: owner)
    }

    /// Throws the refusal of creating data owned by `owner`, if any (a blocked owner, a policy not loaded).
    func authorizeCreation(for owner: Identity?) throws(ProtectionError) {
        guard let owner, !owner.isUnmanaged, let refusal = refusal(of: .create, to: owner) else { return }
        throw refusal
    }

    /// The record of new data owned by `owner`: isolated when `owner` is managed now.
    func record(ofNewDataOwnedBy owner: Identity?) -> RecordedOwner {
        guard let owner, !owner.isUnmanaged else { return RecordedOwner(owner, isolated: false) }
        return RecordedOwner(owner, isolated: isManaged(owner))
    }
}
