import Foundation
import IdentityMetrics
import IdentityProtection
import IdentityRuntime
import MetricsTestKit
import Synchronization
import Testing

/// A store that records which requirement was called, answers from a `FileKeyStore`, and can be made to time
/// out.
final class RecordingKeyStore: KeyStore {
    let base: FileKeyStore
    let calls = Mutex<[String]>([])
    let unavailable = Atomic<Bool>(false)

    init(_ base: FileKeyStore) { self.base = base }

    private func note(_ call: String) throws(ProtectionError) {
        calls.withLock { $0.append(call) }
        if unavailable.load(ordering: .relaxed) { throw .keyStoreUnavailable(reason: "no answer in 2 s") }
    }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try note("currentKey"); return try base.currentKey(for: identity)
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try note("key"); return try base.key(withID: id, for: identity)
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try note("rotateKey"); return try base.rotateKey(for: identity)
    }

    func identitiesWithKeys() throws(ProtectionError) -> KeyListing? {
        try note("identitiesWithKeys")
        return try base.identitiesWithKeys()
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try note("destroyKeys"); try base.destroyKeys(for: identity)
    }

    func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try note("currentKey async"); return try base.currentKey(for: identity)
    }

    func key(withID id: ProtectionKeyID, for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try note("key async"); return try base.key(withID: id, for: identity)
    }

    func rotateKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try note("rotateKey async"); return try base.rotateKey(for: identity)
    }

    func destroyKeys(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) {
        try note("destroyKeys async"); try base.destroyKeys(for: identity)
    }
}

@Suite("MeteredKeyStore: fetches, their latency and timeouts; every requirement forwarded")
struct KeyStoreMetricsTests {
    let directory: String

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("identity-metrics-keys-\(UUID().uuidString)").path
    }

    @Test("every requirement, sync and async, reaches the wrapped store once")
    func forwards() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (_, metrics) = makeMetrics()
        let inner = RecordingKeyStore(try FileKeyStore(atPath: directory))
        let store = metrics.meter(inner)
        #expect(store.base === inner)
        let current = try store.currentKey(for: alice)
        #expect(try store.key(withID: current.id, for: alice).id == current.id)
        let rotated = try store.rotateKey(for: alice)
        try store.destroyKeys(for: alice)
        let later = ContinuousClock.now + .seconds(5)
        let again = try await store.currentKey(for: bob, deadline: later)
        #expect(try await store.key(withID: again.id, for: bob, deadline: later).id == again.id)
        _ = try await store.rotateKey(for: bob, deadline: later)
        #expect(try store.identitiesWithKeys() == KeyListing(identities: [bob]))
        try await store.destroyKeys(for: bob, deadline: later)
        #expect(rotated.id != current.id)
        #expect(inner.calls.withLock { $0 } == [
            "currentKey", "key", "rotateKey", "destroyKeys", "currentKey async", "key async", "rotateKey async",
            "identitiesWithKeys", "destroyKeys async",
        ])
    }

    @Test("fetches are counted once each by operation and outcome, timed, and timeouts counted apart")
    func fetches() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (test, metrics) = makeMetrics()
        let inner = RecordingKeyStore(try FileKeyStore(atPath: directory))
        let store = metrics.meter(inner)
        let key = try store.currentKey(for: alice)
        _ = try store.currentKey(for: alice)
        _ = try await store.currentKey(for: alice, deadline: .now + .seconds(5))
        _ = try store.key(withID: key.id, for: alice)
        let missing = ProtectionKeyID(bytes: [UInt8](repeating: 7, count: ProtectionKeyID.byteCount))!
        #expect(throws: ProtectionError.self) { try store.key(withID: missing, for: alice) }
        inner.unavailable.store(true, ordering: .relaxed)
        await #expect(throws: ProtectionError.self) { try await store.currentKey(for: bob, deadline: .now + .seconds(2)) }
        #expect(throws: ProtectionError.self) { try store.key(withID: key.id, for: alice) }
        #expect(throws: ProtectionError.self) { try store.rotateKey(for: alice) }   // forwarded, not metered

        #expect(test.total(Names.keyFetches, [("operation", "currentKey"), ("outcome", "found")]) == 3)
        #expect(test.total(Names.keyFetches, [("operation", "keyWithID"), ("outcome", "found")]) == 1)
        #expect(test.total(Names.keyFetches, [("operation", "keyWithID"), ("outcome", "keyNotFound")]) == 1)
        #expect(test.total(Names.keyFetches, [("operation", "currentKey"), ("outcome", "keyStoreUnavailable")]) == 1)
        #expect(test.total(Names.keyFetches, [("operation", "keyWithID"), ("outcome", "keyStoreUnavailable")]) == 1)
        #expect(test.counterTotal(label: Names.keyFetches) == 7)
        #expect(test.total(Names.keyFetchTimeouts, [("operation", "currentKey")]) == 1)
        #expect(test.total(Names.keyFetchTimeouts, [("operation", "keyWithID")]) == 1)
        #expect(try test.expectTimer(Names.keyFetchDuration, [("operation", "currentKey"), ("outcome", "found")]).values.count == 3)
        #expect(test.timers.map(\.values.count).reduce(0, +) == 7)
        test.expectNoDimension(containing: accounts.map(\.name) + [key.id.description])
    }
}
