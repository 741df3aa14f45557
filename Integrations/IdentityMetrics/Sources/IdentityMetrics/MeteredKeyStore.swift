import CoreMetrics
import Metrics
import IdentityProtection
import IdentityRuntime

/// The `outcome` of a fetch that answered a key.
private let foundOutcome = "found"

/// A `KeyStore` that meters the fetches of the store it wraps (``IdentityRuntimeMetrics/meter(_:)``), and
/// forwards every requirement to it, synchronous and asynchronous, unchanged.
///
/// Fetches are `currentKey(for:)` (`operation` `currentKey`) and `key(withID:for:)` (`keyWithID`), in both
/// forms:
/// - ``IdentityMetricNames/keyFetches`` by `operation` and `outcome`: `found`, `keyNotFound`,
///   `keyStoreUnavailable` (the store could not answer in time), or `failed` (any other `ProtectionError`);
/// - ``IdentityMetricNames/keyFetchDuration``, the same dimensions: from the call to the answer;
/// - ``IdentityMetricNames/keyFetchTimeouts`` by `operation`: the fetches that ended in `keyStoreUnavailable`.
///
/// Rotations, destructions, ``keyDirectories`` and ``identitiesWithKeys()`` are forwarded, not metered. No dimension names the identity.
///
/// A class, so that the runtime's revocation of open handles keeps one scope per store instance; destroying
/// keys through it, or directly through a wrapped `FileKeyStore`, stops the handles opened through it.
public final class MeteredKeyStore<Base: KeyStore>: KeyStore {
    /// The store that answers.
    public let base: Base
    private let metrics: IdentityRuntimeMetrics
    /// The handles of the common answer (a key found), made once: a fetch is on every protect and unprotect.
    private let found: [Operation: (fetches: Counter, duration: CoreMetrics.Timer)]

    init(_ base: Base, metrics: IdentityRuntimeMetrics) {
        self.base = base
        self.metrics = metrics
        var found: [Operation: (fetches: Counter, duration: CoreMetrics.Timer)] = [:]
        for operation in [Operation.currentKey, .keyWithID] {
            let values = [operation.rawValue, foundOutcome]
            found[operation] = (metrics.keyFetches(values), metrics.keyFetchDuration(values))
        }
        self.found = found
    }

    public func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        let start = ContinuousClock.now
        do throws(ProtectionError) {
            let key = try base.currentKey(for: identity)
            record(.currentKey, nil, since: start)
            return key
        } catch {
            record(.currentKey, error, since: start)
            throw error
        }
    }

    public func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        let start = ContinuousClock.now
        do throws(ProtectionError) {
            let key = try base.key(withID: id, for: identity)
            record(.keyWithID, nil, since: start)
            return key
        } catch {
            record(.keyWithID, error, since: start)
            throw error
        }
    }

    @discardableResult
    public func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try base.rotateKey(for: identity)
    }

    public func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try base.destroyKeys(for: identity)
    }

    /// The base store's: a file manager given the metered store keeps the base store's key files out of reach.
    public var keyDirectories: [String] { base.keyDirectories }

    /// The base store's, not metered: a tenant's wipe through the metered store finds the accounts it holds keys of.
    public func identitiesWithKeys() throws(ProtectionError) -> KeyListing? {
        try base.identitiesWithKeys()
    }

    public func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        let start = ContinuousClock.now
        do throws(ProtectionError) {
            let key = try await base.currentKey(for: identity, deadline: deadline)
            record(.currentKey, nil, since: start)
            return key
        } catch {
            record(.currentKey, error, since: start)
            throw error
        }
    }

    public func key(
        withID id: ProtectionKeyID, for identity: Identity, deadline: ContinuousClock.Instant
    ) async throws(ProtectionError) -> ProtectionKey {
        let start = ContinuousClock.now
        do throws(ProtectionError) {
            let key = try await base.key(withID: id, for: identity, deadline: deadline)
            record(.keyWithID, nil, since: start)
            return key
        } catch {
            record(.keyWithID, error, since: start)
            throw error
        }
    }

    @discardableResult
    public func rotateKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try await base.rotateKey(for: identity, deadline: deadline)
    }

    public func destroyKeys(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) {
        try await base.destroyKeys(for: identity, deadline: deadline)
    }

    private enum Operation: String {
        case currentKey, keyWithID
    }

    /// Counts one fetch that ended with `error` (`nil`: a key) and records its duration.
    private func record(_ operation: Operation, _ error: ProtectionError?, since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        if error == nil, let handles = found[operation] {
            handles.fetches.increment()
            handles.duration.record(duration: elapsed)
            return
        }
        let outcome = switch error {
        case nil: foundOutcome
        case .keyNotFound?: "keyNotFound"
        case .keyStoreUnavailable?: "keyStoreUnavailable"
        case _?: "failed"
        }
        let values = [operation.rawValue, outcome]
        metrics.keyFetches(values).increment()
        metrics.keyFetchDuration(values).record(duration: elapsed)
        if case .keyStoreUnavailable? = error { metrics.keyFetchTimeouts([operation.rawValue]).increment() }
    }
}
