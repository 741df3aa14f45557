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
///
/// Keys destroyed by ``FileKeyStore/destroyKeys(for:)`` are also revoked by their ids, in every scope: a
/// handle opened through a key store of the app's own that wraps the `FileKeyStore` (the manager's store is
/// the wrapper, the keys are the inner store's) stops too, and no handle is handed out later with a copy of
/// a destroyed key that a wrapper kept in a cache of its own.
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
        /// The keys the handles holding each account's token were opened with (those a `FileKeyStore` handed
        /// out).
        var keys: [Identity: Set<HandedOutKey>] = [:]
        /// The epoch of each account's last revocation.
        var revokedAt: [Identity: UInt64] = [:]

        /// Revokes `owner` in this scope: returns its token, for the caller to revoke once out of the lock.
        mutating func revoke(_ owner: Identity) -> RevocationToken? {
            epoch += 1
            revokedAt[owner] = epoch
            keys[owner] = nil
            return tokens.removeValue(forKey: owner)
        }

        func belongs(to object: AnyObject?) -> Bool {
            isValueScope || store === object
        }
    }

    /// One key, as handed out by one `FileKeyStore` instance. The identity it was asked for takes no part: a
    /// store that wraps the `FileKeyStore` may keep an account's keys under another name there (a tenant's
    /// prefix, say), and the handle's owner is then not the name the keys are destroyed by.
    private struct HandedOutKey: Hashable {
        let origin: UInt64
        let id: ProtectionKeyID

        init?(_ key: ProtectionKey) {
            guard let origin = key.origin else { return nil }
            self.init(origin: origin, id: key.id)
        }

        init(origin: UInt64, id: ProtectionKeyID) {
            self.origin = origin
            self.id = id
        }
    }

    private struct State {
        var scopes: [ObjectIdentifier: Scope] = [:]
        /// Every key destroyed by a `FileKeyStore`, by the store instance and the key's id.
        var destroyed: Set<HandedOutKey> = []

        /// Drops the scopes of stores that are gone.
        mutating func dropReleasedScopes() {
            scopes = scopes.filter { $0.value.isValueScope || $0.value.store != nil }
        }
    }

    private let state = LockedValue(State())

    /// The revocation count of `store`'s scope now: an open notes it before it reads the file's owner, and
    /// passes it to ``token(for:in:since:)``.
    package func epoch(of store: any KeyStore) -> UInt64 {
        let (key, object) = Self.scopeKey(store)
        return state.withLock { state in
            guard let scope = state.scopes[key], scope.belongs(to: object) else { return 0 }
            return scope.epoch
        }
    }

    /// Whether `owner` was revoked in `store`'s scope (a wipe of it began or ended there) since `epoch`
    /// (``epoch(of:)`` when an operation began): an operation that fetched the owner's key before such a wipe
    /// reached its files must not write what it decrypted with it.
    package func wasRevoked(_ owner: Identity, in store: any KeyStore, since epoch: UInt64) -> Bool {
        let (key, object) = Self.scopeKey(store)
        return state.withLock { state in
            guard let scope = state.scopes[key], scope.belongs(to: object), let revoked = scope.revokedAt[owner] else {
                return false
            }
            return revoked > epoch
        }
    }

    /// The token that a handle on `owner`'s data, opened with keys from `store`, holds from now on.
    /// - Parameters:
    ///   - epoch: ``epoch(of:)`` when the open began.
    ///   - key: the key the handle decrypts and encrypts with; `nil` for a plain file.
    /// - Throws: ``ProtectionError/keyNotFound(identity:keyID:)`` (103) when `owner`'s keys were destroyed
    ///   since `epoch`, or `key` was destroyed: the open raced a wipe, and its handle would hold what the
    ///   wipe destroyed.
    package func token(
        for owner: Identity, in store: any KeyStore, since epoch: UInt64, key: ProtectionKey?
    ) throws(ProtectionError) -> RevocationToken {
        let (scopeKey, object) = Self.scopeKey(store)
        let handedOut = key.flatMap(HandedOutKey.init)
        return try state.withLock { (state: inout State) throws(ProtectionError) -> RevocationToken in
            if let handedOut, state.destroyed.contains(handedOut) {
                throw .keyNotFound(identity: owner, keyID: handedOut.id)
            }
            var scope = state.scopes[scopeKey].flatMap { $0.belongs(to: object) ? $0 : nil }
                ?? Scope(store: object, isValueScope: object == nil)
            if let revoked = scope.revokedAt[owner], revoked > epoch {
                throw .keyNotFound(identity: owner, keyID: nil)
            }
            if let handedOut { scope.keys[owner, default: []].insert(handedOut) }
            let token = scope.tokens[owner] ?? RevocationToken()
            scope.tokens[owner] = token
            state.scopes[scopeKey] = scope
            return token
        }
    }

    /// Revokes every token handed out for `owner` with keys from `store`: the handles holding them refuse
    /// every later operation, and opens that began before refuse to hand out a handle. Called before an
    /// account's keys or files are destroyed, and again after.
    package func revoke(_ owner: Identity, in store: any KeyStore) {
        let (key, object) = Self.scopeKey(store)
        let revoked = state.withLock { state -> RevocationToken? in
            state.dropReleasedScopes()
            var scope = state.scopes[key].flatMap { $0.belongs(to: object) ? $0 : nil }
                ?? Scope(store: object, isValueScope: object == nil)
            let token = scope.revoke(owner)
            state.scopes[key] = scope
            return token
        }
        revoked?.revoke()
    }

    /// Refuses `key` when the `FileKeyStore` that handed it out has destroyed it: asked through
    /// ``KeyStore/keyForNewData(of:)`` before new data is sealed with the key (a new header, an envelope, an
    /// encryption in place), so that a key a wrapper still caches leaves the file or the data as it was.
    /// - Throws: ``ProtectionError/keyNotFound(identity:keyID:)`` (103).
    package func refuseIfDestroyed(_ key: ProtectionKey, of owner: Identity) throws(ProtectionError) {
        guard let handedOut = HandedOutKey(key) else { return }
        if state.withLock({ $0.destroyed.contains(handedOut) }) {
            throw .keyNotFound(identity: owner, keyID: key.id)
        }
    }

    /// Revokes, in every scope, the tokens of handles opened with one of `keys` as handed out by the
    /// `FileKeyStore` instance `origin` (whatever owner the handles' files name), and refuses a token from now
    /// on to any open with one of them: the keys are being destroyed, whichever store passed them on.
    /// `keys == nil` (the destroyed keys could not be listed) revokes `owner` in every scope.
    package func revoke(_ keys: Set<ProtectionKeyID>?, of owner: Identity, handedOutBy origin: UInt64) {
        let revoked = state.withLock { state -> [RevocationToken] in
            state.dropReleasedScopes()
            let destroyed = keys.map { Set($0.map { HandedOutKey(origin: origin, id: $0) }) }
            if let destroyed { state.destroyed.formUnion(destroyed) }
            var tokens: [RevocationToken] = []
            for (key, var scope) in state.scopes {
                let holders = destroyed.map { destroyed in
                    scope.keys.compactMap { $0.value.isDisjoint(with: destroyed) ? nil : $0.key }
                } ?? [owner]
                guard !holders.isEmpty else { continue }
                for holder in holders {
                    if let token = scope.revoke(holder) { tokens.append(token) }
                }
                state.scopes[key] = scope
            }
            return tokens
        }
        for token in revoked { token.revoke() }
    }

    private static func scopeKey(_ store: any KeyStore) -> (ObjectIdentifier, AnyObject?) {
        if type(of: store) is AnyClass {
            let object = store as AnyObject
            return (ObjectIdentifier(object), object)
        }
        return (ObjectIdentifier(type(of: store)), nil)
    }
}

extension KeyStore {
    /// The key new data of `owner` is sealed with: ``currentKey(for:)``, refused when the `FileKeyStore` that
    /// handed it out has destroyed it since. Every path that writes new encrypted data (a file, an envelope, a
    /// stream, an encryption in place, a new handle) takes its key here, so that a destroyed key a wrapping
    /// store still caches never seals data nobody could read again; the caller asks before anything changes,
    /// and a refusal leaves the file or the data as it was.
    /// - Throws: ``ProtectionError/invalidIdentity(reason:)`` (104) an owner no data may name
    ///   (`EnvelopeFormat.requireRecordable(_:)`), with no key made; ``ProtectionError/keyNotFound(identity:keyID:)``
    ///   (103) the key was destroyed; what ``currentKey(for:)`` throws.
    package func keyForNewData(of owner: Identity) throws(ProtectionError) -> ProtectionKey {
        // Before the store is asked: it would make and keep a first key for an owner no data may name.
        try EnvelopeFormat.requireRecordable(owner)
        let key = try currentKey(for: owner)
        try KeyRevocations.shared.refuseIfDestroyed(key, of: owner)
        return key
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
