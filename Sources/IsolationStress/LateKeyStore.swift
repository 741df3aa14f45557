import Foundation
import IdentityProtection
import IdentityRuntime
import IdentityTesting

/// A remote key store's double for the faults of the program (``IsolationStress/FaultClass/slowKeyStore``,
/// ``IsolationStress/FaultClass/cancellation``): the keys live in a ``FileKeyStore`` (the "database"); the
/// store keeps a cache, as a remote store does, and answers its synchronous requirements from it, or through
/// `StoreBridge.wait` with a short timeout. Some lookups miss the cache on purpose; their fetch then answers at
/// once, late (within the timeout), or never (the bridge gives up: `keyStoreUnavailable`, 113).
///
/// Destroying keys is never delayed and never fails (a wipe's outcome is checked elsewhere), and drops the
/// account's cached keys first; a fetch that was under way then cannot put them back (a generation per
/// account), so a wipe's shredding is the database's.
final class LateKeyStore: KeyStore {
    struct Behaviour: Sendable {
        /// One lookup in `missEvery` misses the cache.
        var missEvery: UInt64
        /// Of the fetches: this many in 16 never answer, this many in 16 answer late (the rest at once).
        var neverIn16: UInt64
        var lateIn16: UInt64
        /// How long a late fetch takes; a prompt one takes up to a tenth of it (a suspension point either way).
        var latency: Duration
        /// How long a lookup waits for its fetch before it gives up (113).
        var timeout: Duration
    }

    private struct State {
        var current: [Identity: ProtectionKey] = [:]
        var byID: [Identity: [ProtectionKeyID: ProtectionKey]] = [:]
        var generations: [Identity: Int] = [:]
        var random: SplitMix64
        var fetches = 0
        var unanswered = 0
    }

    let database: FileKeyStore
    let behaviour: Behaviour
    /// Self-check ``IsolationStress/Fault/keepDestroyedKeys``: destroying keys does nothing.
    let keepsDestroyedKeys: Bool
    private let state: LockedValue<State>

    init(database: FileKeyStore, behaviour: Behaviour, seed: UInt64, keepsDestroyedKeys: Bool) {
        self.database = database
        self.behaviour = behaviour
        self.keepsDestroyedKeys = keepsDestroyedKeys
        state = LockedValue(State(random: SplitMix64(seed: seed)))
    }

    /// Fetches made, and fetches that never answered.
    var counts: (fetches: Int, unanswered: Int) { state.withLock { ($0.fetches, $0.unanswered) } }

    // MARK: Synchronous: the cache, else the bridge

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if let key = cached({ $0.current[identity] }) { return key }
        return try bridged("current:\(identity.name)") { () async throws(ProtectionError) in
            try await self.currentKey(for: identity, deadline: .now + self.behaviour.timeout)
        }
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if let key = cached({ $0.byID[identity]?[id] }) { return key }
        return try bridged("key \(id) of \(identity.name)") { () async throws(ProtectionError) in
            try await self.key(withID: id, for: identity, deadline: .now + self.behaviour.timeout)
        }
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        let key = try database.rotateKey(for: identity)
        state.withLock { $0.current[identity] = key; $0.byID[identity, default: [:]][key.id] = key }
        return key
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        guard !keepsDestroyedKeys else { return }
        forget(identity)
        try database.destroyKeys(for: identity)
        forget(identity)
    }

    /// The cached answer, unless this lookup is one that misses on purpose.
    private func cached(_ lookup: (State) -> ProtectionKey?) -> ProtectionKey? {
        state.withLock { state in
            guard state.random.next() % behaviour.missEvery != 0 else { return nil }
            return lookup(state)
        }
    }

    private func forget(_ identity: Identity) {
        state.withLock { state in
            state.current[identity] = nil
            state.byID[identity] = nil
            state.generations[identity, default: 0] += 1
        }
    }

    /// A request of this store in a `StoreBridge` run.
    private struct Request: Hashable, Sendable {
        let store: ObjectIdentifier
        let name: String
    }

    private func bridged<Value: Sendable>(
        _ key: String, _ fetch: @escaping @Sendable () async throws(ProtectionError) -> Value
    ) throws(ProtectionError) -> Value {
        try StoreBridge.wait(
            for: Request(store: ObjectIdentifier(self), name: key), operation: key, timeout: behaviour.timeout,
            timedOut: ProtectionError.keyStoreUnavailable(reason: "no answer in \(behaviour.timeout)"), fetch)
    }

    // MARK: Asynchronous: the "network"

    func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        let generation = try await travel(identity, deadline)
        let key = try database.currentKey(for: identity)
        remember(key, current: true, for: identity, generation: generation)
        return key
    }

    func key(withID id: ProtectionKeyID, for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        let generation = try await travel(identity, deadline)
        let key = try database.key(withID: id, for: identity)
        remember(key, current: false, for: identity, generation: generation)
        return key
    }

    func rotateKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try rotateKey(for: identity)
    }

    func destroyKeys(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) {
        try destroyKeys(for: identity)
    }

    /// Caches `key` unless the account's keys were destroyed since the fetch began.
    private func remember(_ key: ProtectionKey, current: Bool, for identity: Identity, generation: Int) {
        state.withLock { state in
            guard state.generations[identity, default: 0] == generation else { return }
            if current { state.current[identity] = key }
            state.byID[identity, default: [:]][key.id] = key
        }
    }

    /// One round trip: at once, late, or never (until `deadline`, then 113); a cancelled fetch ends at once
    /// with 113. Returns the account's generation when it began.
    private func travel(_ identity: Identity, _ deadline: ContinuousClock.Instant) async throws(ProtectionError) -> Int {
        let (generation, roll, fraction) = state.withLock { state in
            state.fetches += 1
            return (state.generations[identity, default: 0], state.random.next() % 16, state.random.next() % 1000)
        }
        let unavailable = ProtectionError.keyStoreUnavailable(reason: "the key store did not answer")
        do {
            if roll < behaviour.neverIn16 {
                state.withLock { $0.unanswered += 1 }
                try await Task.sleep(until: deadline, clock: .continuous)
                throw unavailable
            }
            let latency = roll < behaviour.neverIn16 + behaviour.lateIn16 ? behaviour.latency : behaviour.latency / 10
            try await Task.sleep(for: latency * (Double(fraction) / 1000))
        } catch {
            throw unavailable
        }
        if Task.isCancelled { throw unavailable }
        return generation
    }
}
