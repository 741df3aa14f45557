import Foundation
import IdentityProtection
import IdentityRuntime
import NIOCore
import PostgresNIO
import NIOConcurrencyHelpers

/// A `KeyStore` shared by a fleet of instances through PostgreSQL: envelope-encrypted keys, rotation
/// coordinated by the database, fleet-wide crypto-shredding within a second.
///
/// - **Wrapping.** Each key is stored wrapped (AES-256-GCM) under a key-encryption key from a
///   ``KeyEncryptionKeyProvider``; the KEK never enters the database, only its id. The account name, the key id
///   and the KEK id are authenticated with the wrapped key, so a row copied to another account does not unwrap.
/// - **Rotation.** `identity_key_accounts` has one row per account naming its current key (its primary key makes
///   "one current key per account" a constraint, not a convention). ``rotateKey(for:)`` inserts the new key and
///   moves that pointer in one statement; concurrent rotations serialize on the row and the last one wins.
///   Retired keys stay in `identity_keys` and keep decrypting old data. A first ``currentKey(for:)`` on several
///   instances at once creates exactly one key (`INSERT ... ON CONFLICT DO NOTHING`, then read back).
/// - **Cache.** Keys are kept in memory for ``PostgresFleetConfiguration/cacheLifetime`` seconds after they were
///   read. A trigger `NOTIFY`s `identity_keys` with the account on every change; every instance then drops that
///   account's cached keys (the next use reads the database again). The warm path takes one lock and reads
///   no clock other than the monotonic one.
/// - **Crypto-shredding.** ``destroyKeys(for:)`` drops the local cache, then deletes the account's rows; every
///   other instance hears of it and drops its cached copies (measured well under a second, see Sources/IdentityRuntime/IdentityRuntime.docc/RunningAFleet.md).
///   After that nothing in the fleet can decrypt the account's data: `ProtectionError.keyNotFound`.
///
/// When the database is unreachable:
/// - a key already cached keeps working while the notification connection has been lost for less than
///   ``PostgresFleetConfiguration/disconnectedGrace`` seconds (and the entry is younger than
///   ``PostgresFleetConfiguration/cacheLifetime``); after that it is not used, because a wipe made elsewhere
///   could not have been heard of;
/// - everything else (a key not cached, a first key, ``rotateKey(for:)``, ``destroyKeys(for:)``) refuses with
///   `ProtectionError.keyStoreUnavailable(reason:)` (113) after at most the connect and query timeouts, or at
///   once while the fleet waits to reconnect. It never answers `keyNotFound` for a key it could not look up;
/// - when the notification connection is back, every cached key is dropped (notifications may have been
///   missed) and read again on use.
public final class PostgresKeyStore: KeyStore {
    /// The database connections.
    public let fleet: PostgresFleet
    /// Wraps and unwraps the keys.
    public let keyEncryptionKeys: any KeyEncryptionKeyProvider

    /// Counters, for monitoring and for the tests.
    public struct Statistics: Sendable, Equatable {
        /// Keys read from the database (cache misses that found a key).
        public var fetches: Int
        /// Notifications that dropped an account's cached keys.
        public var invalidations: Int
        /// Times the whole cache was dropped because the notification connection came back.
        public var flushes: Int
    }

    private struct Cached {
        var key: ProtectionKey
        var fetchedAt: UInt64
    }

    private struct AccountCache {
        var current: Cached?
        var keys: [ProtectionKeyID: Cached] = [:]
    }

    private struct State {
        var accounts: [Identity: AccountCache] = [:]
        /// Bumped by every invalidation: a fetch that started before one does not fill the cache.
        var generation: UInt64 = 0
        var listening = false
        var listenEpoch = -1
        var lostAt: UInt64
        var statistics = Statistics(fetches: 0, invalidations: 0, flushes: 0)

        /// Whether cached entries may be used at `now`.
        func cacheUsable(_ now: UInt64, grace: UInt64) -> Bool {
            listening || now &- lostAt < grace
        }
    }

    private let state: NIOLockedValueBox<State>
    private let lifetime: UInt64
    private let grace: UInt64
    private let observer: NIOLockedValueBox<Int?> = NIOLockedValueBox(nil)

    /// A key store on `fleet`'s database, wrapping keys with `keyEncryptionKeys`.
    public init(fleet: PostgresFleet, keyEncryptionKeys: any KeyEncryptionKeyProvider) {
        self.fleet = fleet
        self.keyEncryptionKeys = keyEncryptionKeys
        self.lifetime = PostgresFleet.nanoseconds(fleet.configuration.cacheLifetime)
        self.grace = PostgresFleet.nanoseconds(fleet.configuration.disconnectedGrace)
        self.state = NIOLockedValueBox(State(lostAt: PostgresFleet.now()))
        let (token, now) = fleet.addObserver { [weak self] event in self?.handle(event) }
        observer.withLockedValue { $0 = token }
        handle(now)
    }

    deinit {
        if let token = observer.withLockedValue({ $0 }) { fleet.removeObserver(token) }
    }

    /// The counters so far.
    public var statistics: Statistics {
        state.withLockedValue { $0.statistics }
    }

    /// Drops every cached key (the next use of each reads the database).
    public func dropCache() {
        state.withLockedValue { state in
            state.accounts.removeAll()
            state.generation &+= 1
        }
    }

    // MARK: KeyStore, synchronous: the cache, else StoreBridge

    public func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        guard !identity.isUnmanaged else { throw .invalidIdentity(reason: "the unmanaged identity has no keys") }
        if let cached = cachedCurrentKey(for: identity).key { return cached }
        return try bridged("current key of \(identity.name)") { () async throws(ProtectionError) in
            try await self.currentKey(for: identity, deadline: self.fleet.callDeadline())
        }
    }

    public func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if identity.isUnmanaged { throw .keyNotFound(identity: identity, keyID: id) }
        if let cached = cachedKey(withID: id, for: identity).key { return cached }
        return try bridged("key \(id) of \(identity.name)") { () async throws(ProtectionError) in
            try await self.key(withID: id, for: identity, deadline: self.fleet.callDeadline())
        }
    }

    @discardableResult
    public func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        guard !identity.isUnmanaged else { throw .invalidIdentity(reason: "the unmanaged identity has no keys") }
        return try bridged("rotating the key of \(identity.name)") { () async throws(ProtectionError) in
            try await self.rotateKey(for: identity, deadline: self.fleet.callDeadline())
        }
    }

    public func destroyKeys(for identity: Identity) throws(ProtectionError) {
        if identity.isUnmanaged { return }
        forget(identity)
        try bridged("destroying the keys of \(identity.name)") { () async throws(ProtectionError) in
            try await self.destroyKeys(for: identity, deadline: self.fleet.callDeadline())
        }
    }

    /// The answer of the asynchronous requirement: awaited inside the managers' `async` entry points, waited
    /// for on the thread elsewhere (``PostgresFleetConfiguration/callTimeout`` at most).
    private func bridged<Value: Sendable>(
        _ operation: String, _ fetch: @escaping @Sendable () async throws(ProtectionError) -> Value
    ) throws(ProtectionError) -> Value {
        let timeout = fleet.configuration.callTimeout
        return try StoreBridge.wait(
            for: BridgedRequest(store: ObjectIdentifier(self), operation: operation), operation: operation, timeout: .nanoseconds(Int64(PostgresFleet.nanoseconds(timeout))),
            timedOut: PostgresFleetError.timedOut(operation: operation, seconds: timeout).protectionError, fetch)
    }

    /// A request in a `StoreBridge` run: this store and the operation (another store's answer never stands in).
    private struct BridgedRequest: Hashable, Sendable {
        let store: ObjectIdentifier
        let operation: String
    }

    // MARK: KeyStore, asynchronous: the cache, else the database

    public func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        guard !identity.isUnmanaged else { throw .invalidIdentity(reason: "the unmanaged identity has no keys") }
        let (cached, generation) = cachedCurrentKey(for: identity)
        if let cached { return cached }
        return try await fetchCurrent(identity, generation: generation, deadline: fleet.callDeadline(deadline))
    }

    public func key(withID id: ProtectionKeyID, for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        if identity.isUnmanaged { throw .keyNotFound(identity: identity, keyID: id) }
        let (cached, generation) = cachedKey(withID: id, for: identity)
        if let cached { return cached }
        let rows = try await run(
            "SELECT kek_id, wrapped_key FROM identity_keys WHERE account = \(identity.foldedName) AND key_id = \(ByteBuffer(bytes: id.bytes))",
            operation: "reading key \(id) of \(identity.name)", deadline: fleet.callDeadline(deadline))
        guard let row = rows.first else { throw .keyNotFound(identity: identity, keyID: id) }
        let key = try unwrap(row, id: id, identity: identity)
        remember(key, for: identity, asCurrent: false, generation: generation)
        return key
    }

    @discardableResult
    public func rotateKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        guard !identity.isUnmanaged else { throw .invalidIdentity(reason: "the unmanaged identity has no keys") }
        let generation = state.withLockedValue { $0.generation }
        let key = try ProtectionKey.generate()
        let (kekID, wrapped) = try keyEncryptionKeys.wrap(key, context: Self.context(identity))
        let account = identity.foldedName
        _ = try await run(
            """
            WITH k AS (
                INSERT INTO identity_keys (account, key_id, kek_id, wrapped_key)
                VALUES (\(account), \(ByteBuffer(bytes: key.id.bytes)), \(kekID), \(ByteBuffer(bytes: wrapped))) RETURNING account, key_id
            )
            INSERT INTO identity_key_accounts (account, current_key_id) SELECT account, key_id FROM k
            ON CONFLICT (account) DO UPDATE SET current_key_id = EXCLUDED.current_key_id,
                generation = identity_key_accounts.generation + 1, updated_at = now()
            """,
            operation: "rotating the key of \(identity.name)", deadline: fleet.callDeadline(deadline))
        remember(key, for: identity, asCurrent: true, generation: generation)
        return key
    }

    public func destroyKeys(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) {
        if identity.isUnmanaged { return }
        // Locally first: whatever the database says, this instance stops using the keys now.
        forget(identity)
        _ = try await run(
            "DELETE FROM identity_key_accounts WHERE account = \(identity.foldedName)",
            operation: "destroying the keys of \(identity.name)", deadline: fleet.callDeadline(deadline))
        forget(identity)
    }

    // MARK: Cache

    /// The cached current key of `identity` when it may be used now, and the cache generation to fill it at.
    private func cachedCurrentKey(for identity: Identity) -> (key: ProtectionKey?, generation: UInt64) {
        let now = PostgresFleet.now()
        return state.withLockedValue { state in
            guard state.cacheUsable(now, grace: grace), let entry = state.accounts[identity]?.current,
                  now &- entry.fetchedAt < lifetime else { return (nil, state.generation) }
            return (entry.key, state.generation)
        }
    }

    /// The cached key `id` of `identity` when it may be used now, and the cache generation to fill it at.
    private func cachedKey(withID id: ProtectionKeyID, for identity: Identity) -> (key: ProtectionKey?, generation: UInt64) {
        let now = PostgresFleet.now()
        return state.withLockedValue { state in
            guard state.cacheUsable(now, grace: grace), let account = state.accounts[identity] else {
                return (nil, state.generation)
            }
            if let entry = account.keys[id], now &- entry.fetchedAt < lifetime { return (entry.key, state.generation) }
            if let entry = account.current, entry.key.id == id, now &- entry.fetchedAt < lifetime {
                return (entry.key, state.generation)
            }
            return (nil, state.generation)
        }
    }

    /// Drops the cached keys of `identity`; a fetch under way does not fill the cache.
    private func forget(_ identity: Identity) {
        state.withLockedValue { state in
            state.accounts[identity] = nil
            state.generation &+= 1
        }
    }

    // MARK: Database

    private func fetchCurrent(_ identity: Identity, generation: UInt64, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        let account = identity.foldedName
        let select: PostgresQuery = """
            SELECT k.key_id, k.kek_id, k.wrapped_key FROM identity_key_accounts a
            JOIN identity_keys k ON k.account = a.account AND k.key_id = a.current_key_id
            WHERE a.account = \(account)
            """
        var rows = try await run(select, operation: "reading the current key of \(identity.name)", deadline: deadline)
        if rows.isEmpty {
            let key = try ProtectionKey.generate()
            let (kekID, wrapped) = try keyEncryptionKeys.wrap(key, context: Self.context(identity))
            // Several instances may get here at once: one insert wins, the others read its key back.
            _ = try await run(
                """
                WITH a AS (
                    INSERT INTO identity_key_accounts (account, current_key_id) VALUES (\(account), \(ByteBuffer(bytes: key.id.bytes)))
                    ON CONFLICT (account) DO NOTHING RETURNING account
                )
                INSERT INTO identity_keys (account, key_id, kek_id, wrapped_key)
                SELECT account, \(ByteBuffer(bytes: key.id.bytes)), \(kekID), \(ByteBuffer(bytes: wrapped)) FROM a
                """,
                operation: "creating the first key of \(identity.name)", deadline: deadline)
            rows = try await run(select, operation: "reading the current key of \(identity.name)", deadline: deadline)
        }
        guard let row = rows.first else {
            throw PostgresFleetError.corruptRow(table: "identity_key_accounts", reason: "no current key after creating one").protectionError
        }
        let id: ProtectionKeyID
        do {
            let bytes = Array(try Array(row)[0].decode(Data.self, context: .default))
            guard let parsed = ProtectionKeyID(bytes: bytes) else { throw PostgresFleetError.corruptRow(table: "identity_keys", reason: "key id of \(bytes.count) bytes") }
            id = parsed
        } catch {
            throw PostgresFleetError.from(error, operation: "decoding a key row").protectionError
        }
        let key = try unwrap(row, id: id, identity: identity, offset: 1)
        remember(key, for: identity, asCurrent: true, generation: generation)
        return key
    }

    /// Unwraps the `kek_id`, `wrapped_key` columns at `offset`, `offset + 1` of `row`.
    private func unwrap(_ row: PostgresRow, id: ProtectionKeyID, identity: Identity, offset: Int = 0) throws(ProtectionError) -> ProtectionKey {
        let kekID: String
        let wrapped: [UInt8]
        do {
            let cells = Array(row)
            guard cells.count >= offset + 2 else { throw PostgresFleetError.corruptRow(table: "identity_keys", reason: "missing columns") }
            kekID = try cells[offset].decode(String.self, context: .default)
            wrapped = Array(try cells[offset + 1].decode(Data.self, context: .default))
        } catch {
            throw PostgresFleetError.from(error, operation: "decoding a key row").protectionError
        }
        let key = try keyEncryptionKeys.unwrap(wrapped, keyID: id, keyEncryptionKeyID: kekID, context: Self.context(identity))
        state.withLockedValue { $0.statistics.fetches += 1 }
        return key
    }

    private func remember(_ key: ProtectionKey, for identity: Identity, asCurrent: Bool, generation: UInt64) {
        let now = PostgresFleet.now()
        state.withLockedValue { state in
            guard state.generation == generation else { return }
            let entry = Cached(key: key, fetchedAt: now)
            if asCurrent {
                state.accounts[identity, default: AccountCache()].current = entry
            } else {
                state.accounts[identity, default: AccountCache()].keys[key.id] = entry
            }
        }
    }

    private func run(_ query: PostgresQuery, operation: String, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> [PostgresRow] {
        do throws(PostgresFleetError) {
            return try await fleet.query(query, operation: operation, deadline: deadline)
        } catch {
            throw error.protectionError
        }
    }

    /// What the wrapped key is bound to besides its id: the account.
    static func context(_ identity: Identity) -> [UInt8] {
        Array("identity-postgres/account:\(identity.foldedName)/kek:".utf8)
    }

    // MARK: Events

    private func handle(_ event: PostgresFleet.Event) {
        switch event {
        case let .notification(channel, payload):
            guard channel == "identity_keys" else { return }
            let identity = Identity(payload)
            state.withLockedValue { state in
                state.accounts[identity] = nil
                state.generation &+= 1
                state.statistics.invalidations += 1
            }
        case let .listening(epoch):
            state.withLockedValue { state in
                guard epoch > state.listenEpoch else { return }
                state.listenEpoch = epoch
                state.listening = true
                // Changes made while nobody listened were not heard: forget everything.
                state.accounts.removeAll()
                state.generation &+= 1
                state.statistics.flushes += 1
            }
        case let .notListening(epoch, at):
            state.withLockedValue { state in
                guard epoch > state.listenEpoch else { return }
                state.listenEpoch = epoch
                state.listening = false
                state.lostAt = at
            }
        }
    }
}
