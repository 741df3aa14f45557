import IdentityRuntime
import Synchronization

/// The one place where an account's open handles learn that its keys were destroyed: every ``ProtectedFile``
/// on an account's data holds a token taken from here when it was opened, and destroying the account's keys
/// (``FileKeyStore/destroyKeys(for:)``, a wipe through ``FileProtectionManager/removeFiles(ownedBy:)`` or
/// `PolicyManager.wipeData(forAccount:)`) revokes every token handed out for it until then. A revoked token
/// stays revoked: a handle never works again, whatever happens to the account afterwards (unblocked,
/// enrolled again, a new key made under the same name); handles opened later take a new token.
///
/// Tokens are kept per key store instance (a store that is a value, not an object, shares one scope with
/// every store of its type: revoking there revokes too much, never too little), so a wipe of an account in
/// one store never touches handles that another store's keys opened.
package final class KeyRevocations: Sendable {
    /// The process's registry.
    package static let shared = KeyRevocations()

    // Reached only under the registry's lock; the store in it is compared by identity, never used.
    private struct Scope: @unchecked Sendable {
        /// The store the scope belongs to; `nil` for a value-type store's shared scope. A scope whose store is
        /// gone is dropped, so a new store at the same address never inherits it.
        weak var store: AnyObject?
        let isValueScope: Bool
        /// Counts revocations; a handle's open notes it before it looks at the file.
        var epoch: UInt64 = 0
        var tokens: [Identity: RevocationToken] = [:]
        /// The epoch of each account's last revocation.
        var revokedAt: [Identity: UInt64] = [:]

        func belongs(to object: AnyObject?) -> Bool {
            isValueScope || store === object
        }
    }

    private let scopes = LockedValue([ObjectIdentifier: Scope]())

    /// The revocation count of `store`'s scope now: an open notes it before it reads the file's owner, and
    /// passes it to ``token(for:in:since:)``.
    package func epoch(of store: any KeyStore) -> UInt64 {
        let (key, object) = Self.scopeKey(store)
        return scopes.withLock { scopes in
            guard let scope = scopes[key], scope.belongs(to: object) else { return 0 }
            return scope.epoch
        }
    }

    /// The token that a handle on `owner`'s data, opened with keys from `store`, holds from now on.
    /// - Parameter epoch: ``epoch(of:)`` when the open began.
    /// - Throws: ``ProtectionError/keyNotFound(identity:keyID:)`` (103) when `owner`'s keys were destroyed
    ///   since `epoch`: the open raced a wipe, and its handle would hold what the wipe destroyed.
    package func token(for owner: Identity, in store: any KeyStore, since epoch: UInt64) throws(ProtectionError) -> RevocationToken {
        let (key, object) = Self.scopeKey(store)
        return try scopes.withLock { (scopes: inout [ObjectIdentifier: Scope]) throws(ProtectionError) -> RevocationToken in
            var scope = scopes[key].flatMap { $0.belongs(to: object) ? $0 : nil }
                ?? Scope(store: object, isValueScope: object == nil)
            if let revoked = scope.revokedAt[owner], revoked > epoch {
                throw .keyNotFound(identity: owner, keyID: nil)
            }
            if let token = scope.tokens[owner] { return token }
            let token = RevocationToken()
            scope.tokens[owner] = token
            scopes[key] = scope
            return token
        }
    }

    /// Revokes every token handed out for `owner` with keys from `store`: the handles holding them refuse
    /// every later operation, and opens that began before refuse to hand out a handle. Called before an
    /// account's keys or files are destroyed, and again after.
    package func revoke(_ owner: Identity, in store: any KeyStore) {
        let (key, object) = Self.scopeKey(store)
        let revoked = scopes.withLock { scopes -> RevocationToken? in
            // Scopes of stores that are gone go too.
            scopes = scopes.filter { $0.value.isValueScope || $0.value.store != nil }
            var scope = scopes[key].flatMap { $0.belongs(to: object) ? $0 : nil }
                ?? Scope(store: object, isValueScope: object == nil)
            scope.epoch += 1
            scope.revokedAt[owner] = scope.epoch
            let token = scope.tokens.removeValue(forKey: owner)
            scopes[key] = scope
            return token
        }
        revoked?.revoke()
    }

    private static func scopeKey(_ store: any KeyStore) -> (ObjectIdentifier, AnyObject?) {
        if type(of: store) is AnyClass {
            let object = store as AnyObject
            return (ObjectIdentifier(object), object)
        }
        return (ObjectIdentifier(type(of: store)), nil)
    }
}

/// Whether the keys a handle was opened with have been destroyed since (see ``KeyRevocations``).
///
/// Asked before every read and write of a handle: one atomic load, no lock.
package final class RevocationToken: Sendable {
    private let revoked = Atomic(false)

    /// `true` once the owner's keys were destroyed. Acquiring: a handle that sees it also sees what the wipe
    /// did before it revoked.
    package var isRevoked: Bool {
        revoked.load(ordering: .acquiring)
    }

    func revoke() {
        revoked.store(true, ordering: .releasing)
    }
}
