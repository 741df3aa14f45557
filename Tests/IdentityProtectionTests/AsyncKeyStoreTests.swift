import Foundation
import IdentityProtection
@testable import IdentityRuntime
import IdentityTesting
import Testing

/// A key store that must fetch over a "network": keys live in a `FileKeyStore` (the database); every fetch
/// suspends (a latency, or a gate the test opens), fills a cache, and the synchronous requirements answer from
/// that cache or through `StoreBridge.wait`, as a real remote store does.
final class RemoteKeyStoreDouble: KeyStore {
    private struct State {
        var current: [Identity: ProtectionKey] = [:]
        var byID: [ProtectionKeyID: ProtectionKey] = [:]
        var fetches = 0
        var inFlight = 0
        var maxInFlight = 0
        var gate: [CheckedContinuation<Void, Never>]? = nil
    }

    let database: FileKeyStore
    let latency: Duration
    let bridgeTimeout: Duration
    private let state = LockedValue(State())

    init(database: FileKeyStore, latency: Duration = .milliseconds(20), bridgeTimeout: Duration = .seconds(5)) {
        self.database = database
        self.latency = latency
        self.bridgeTimeout = bridgeTimeout
    }

    var fetches: Int { state.withLock { $0.fetches } }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }

    /// From now on every fetch waits until ``openGate()`` (instead of the latency).
    func closeGate() { state.withLock { $0.gate = [] } }

    func openGate() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state.gate = nil }
            return state.gate ?? []
        }
        waiting.forEach { $0.resume() }
    }

    func dropCache() { state.withLock { $0.current = [:]; $0.byID = [:] } }

    // MARK: Synchronous: the cache, else the bridge

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if let key = state.withLock({ $0.current[identity] }) { return key }
        return try bridged("current:\(identity.name)") { () async throws(ProtectionError) in
            try await self.currentKey(for: identity, deadline: .now + self.bridgeTimeout)
        }
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if let key = state.withLock({ $0.byID[id] }) { return key }
        return try bridged("key \(id) of \(identity.name)") { () async throws(ProtectionError) in
            try await self.key(withID: id, for: identity, deadline: .now + self.bridgeTimeout)
        }
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try bridged("rotate:\(identity.name)") { () async throws(ProtectionError) in
            try await self.rotateKey(for: identity, deadline: .now + self.bridgeTimeout)
        }
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try bridged("destroy:\(identity.name)") { () async throws(ProtectionError) in
            try await self.destroyKeys(for: identity, deadline: .now + self.bridgeTimeout)
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
        // The store's identity is part of the request's key: another store's answers never stand in for its own.
        try StoreBridge.wait(
            for: Request(store: ObjectIdentifier(self), name: key), operation: key, timeout: bridgeTimeout,
            timedOut: ProtectionError.keyStoreUnavailable(reason: "no answer in \(bridgeTimeout)"), fetch)
    }

    // MARK: Asynchronous: the "network"

    func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try await travel(deadline)
        let key = try database.currentKey(for: identity)
        state.withLock { $0.current[identity] = key; $0.byID[key.id] = key }
        return key
    }

    func key(withID id: ProtectionKeyID, for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try await travel(deadline)
        let key = try database.key(withID: id, for: identity)
        state.withLock { $0.byID[key.id] = key }
        return key
    }

    func rotateKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try await travel(deadline)
        let key = try database.rotateKey(for: identity)
        state.withLock { $0.current[identity] = key; $0.byID[key.id] = key }
        return key
    }

    func destroyKeys(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) {
        state.withLock { state in
            state.current[identity] = nil
            state.byID = state.byID.filter { $0.value.id != state.current[identity]?.id }
        }
        try await travel(deadline)
        try database.destroyKeys(for: identity)
        state.withLock { $0.current[identity] = nil; $0.byID = [:] }
    }

    /// One round trip: the latency (or the gate), bounded by `deadline`.
    private func travel(_ deadline: ContinuousClock.Instant) async throws(ProtectionError) {
        let gated = state.withLock { state -> Bool in
            state.fetches += 1
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            return state.gate != nil
        }
        defer { state.withLock { $0.inFlight -= 1 } }
        if gated {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = state.withLock { state -> Bool in
                    guard state.gate != nil else { return false }
                    state.gate!.append(continuation)
                    return true
                }
                if !waiting { continuation.resume() }
            }
        } else if ContinuousClock.now + latency > deadline {
            try? await Task.sleep(until: deadline)
            throw .keyStoreUnavailable(reason: "no answer by the deadline")
        } else {
            try? await Task.sleep(for: latency)
        }
    }
}

/// A fixture whose managers use a ``RemoteKeyStoreDouble`` over the fixture's file key store.
struct RemoteFixture {
    let base: Fixture
    let remote: RemoteKeyStoreDouble
    let data: DataProtectionManager
    let files: FileProtectionManager

    init(latency: Duration = .milliseconds(20), bridgeTimeout: Duration = .seconds(5), isolated: Bool = true) throws {
        base = try Fixture(isolated: isolated)
        remote = RemoteKeyStoreDouble(database: base.keys, latency: latency, bridgeTimeout: bridgeTimeout)
        data = DataProtectionManager(keyStore: remote, policy: base.policy)
        files = try FileProtectionManager(
            roots: [base.root], keyStore: remote, policy: base.policy, stateDirectory: base.directory + "/state-remote")
    }
}

@Suite("Asynchronous key stores: the async entry points await, the synchronous ones block only their thread")
struct AsyncKeyStoreTests {
    @Test("async protect and unprotect fetch a missing key by awaiting it, with the synchronous results")
    func asyncRoundTrip() async throws {
        let fixture = try RemoteFixture()
        let sealed = try await IdentityContext.withThreadIdentity(alice) {
            try await fixture.data.async.protect(Data("salary".utf8))
        }
        #expect(fixture.remote.fetches == 1)
        fixture.remote.dropCache()
        let opened = try await IdentityContext.withThreadIdentity(alice) { try await fixture.data.async.unprotect(sealed) }
        #expect(opened == Data("salary".utf8))
        #expect(fixture.remote.fetches == 2)
        // Warm: nothing is fetched again, and the synchronous API reads the same.
        let again = try await IdentityContext.withThreadIdentity(alice) { try await fixture.data.async.unprotect(sealed) }
        #expect(again == opened)
        #expect(fixture.remote.fetches == 2)
        #expect(try IdentityContext.withThreadIdentity(alice) { try fixture.data.unprotect(sealed) } == opened)
        let text = try await fixture.data.async.protect("note", owner: alice)
        #expect(try await IdentityContext.withThreadIdentity(alice) { try await fixture.data.async.unprotect(text) } == "note")
    }

    @Test("the access check runs before the key store is asked: a refused caller fetches nothing")
    func refusedBeforeFetching() async throws {
        let fixture = try RemoteFixture()
        let sealed = try fixture.base.data.protect(Data("x".utf8), owner: alice)
        let before = fixture.remote.fetches
        await #expect(throws: ProtectionError.accessDenied(identity: alice, reader: bob)) {
            try await IdentityContext.withThreadIdentity(bob) { try await fixture.data.async.unprotect(sealed) }
        }
        await #expect(throws: ProtectionError.self) {
            try await fixture.data.async.unprotect(sealed)   // no identity
        }
        #expect(fixture.remote.fetches == before)
    }

    @Test("64 tasks missing the cache at once are all in flight together: no cooperative thread waits")
    func missesDoNotHoldThreads() async throws {
        // The gate holds every fetch until all 64 are under way, which a loaded machine may take seconds to
        // reach: the store's timeout must not end them first.
        let fixture = try RemoteFixture(bridgeTimeout: .seconds(300))
        fixture.remote.closeGate()
        let accounts = (0..<64).map { Identity("user\($0)@contoso.com") }
        accounts.forEach(fixture.base.policy.addManagedIdentity)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for account in accounts {
                group.addTask {
                    let sealed = try await fixture.data.async.protect(Data(account.name.utf8), owner: account)
                    #expect(try fixture.data.protectionInfo(sealed)?.owner == account)
                }
            }
            // Every fetch is suspended at the gate; were any caller blocking its thread, at most as many
            // fetches as cooperative threads could be under way and this loop would never see 64.
            var spins = 0
            while fixture.remote.maxInFlight < 64 && spins < 10_000 {
                await Task.yield()
                try await Task.sleep(for: .milliseconds(1))
                spins += 1
            }
            #expect(fixture.remote.maxInFlight == 64)
            // The pool is free: other work runs while every protect waits for its key.
            let probe = await Task.detached { 42 }.value
            #expect(probe == 42)
            fixture.remote.openGate()
            try await group.waitForAll()
        }
    }

    @Test("the synchronous API on GCD threads blocks only those threads and gets the same keys")
    func synchronousFromDispatch() async throws {
        let fixture = try RemoteFixture()
        let (_, issues) = await capturingIssues(kinds: ["blockingWaitInTask"]) {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    IdentityStrictMode.checking {
                        let sealed = try? fixture.data.protect(Data("gcd".utf8), owner: mallory)
                        fixture.remote.dropCache()
                        let opened = try? IdentityContext.withThreadIdentity(mallory) { try sealed.map(fixture.data.unprotect) }
                        #expect(opened == Data("gcd".utf8))
                    }
                    continuation.resume()
                }
            }
        }
        // Other suites may block in tasks meanwhile; none of those waits concerns mallory.
        #expect(issues.filter { $0.description.contains(mallory.name) }.isEmpty)
        #expect(fixture.remote.fetches == 2)
    }

    @Test("a synchronous call that blocks inside a task is reported by strict mode, and still answers")
    func blockingInTaskIsReported() async throws {
        let fixture = try RemoteFixture()
        let (sealed, issues) = try await capturingIssues(kinds: ["blockingWaitInTask"]) {
            try IdentityStrictMode.checking {
                try fixture.data.protect(Data("in a task".utf8), owner: alice)
            }
        }
        #expect(try fixture.base.data.protectionInfo(sealed)?.owner == alice)
        let mine = issues.filter { $0.description.contains(fixture.base.directory) || $0.description.contains(alice.name) }
        #expect(mine.count == 1)
        // Warm now: the same call does not wait, so nothing is reported.
        let (_, later) = try await capturingIssues(kinds: ["blockingWaitInTask"]) {
            try IdentityStrictMode.checking { try fixture.data.protect(Data("again".utf8), owner: alice) }
        }
        #expect(later.filter { $0.description.contains(alice.name) }.isEmpty)
    }

    @Test("a store that does not answer in time is a typed refusal, on both paths, and nothing is written")
    func timeoutsAreTyped() async throws {
        let fixture = try RemoteFixture(bridgeTimeout: .milliseconds(200))
        fixture.remote.closeGate()
        defer { fixture.remote.openGate() }
        // Synchronous, on a GCD thread: the bridge gives up after its timeout.
        let syncError = await withCheckedContinuation { (continuation: CheckedContinuation<ProtectionError?, Never>) in
            DispatchQueue.global().async {
                do throws(ProtectionError) {
                    _ = try fixture.data.protect(Data("x".utf8), owner: alice)
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error)
                }
            }
        }
        #expect(syncError?.code == 113)
        // Asynchronous: the store's own deadline (the gate holds the fetch; the store is asked to answer
        // within the bridge timeout, after which the wait ends with its error).
        fixture.remote.openGate()
        let slow = try RemoteFixture(latency: .seconds(30), bridgeTimeout: .milliseconds(200))
        let path = slow.base.path("never.txt")
        await #expect(throws: ProtectionError.self) {
            try await IdentityContext.withThreadIdentity(alice) {
                try await slow.files.async.writeFile(atPath: path, contents: Data("secret".utf8))
            }
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: slow.base.root).isEmpty)
    }

    @Test("file operations that fetch a key run again with it and leave exactly what the synchronous call leaves")
    func fileOperationsAwaitKeys() async throws {
        let fixture = try RemoteFixture()
        let files = fixture.files
        try await IdentityContext.withThreadIdentity(alice) {
            let path = fixture.base.path("report.txt")
            try await files.async.writeFile(atPath: path, contents: Data("quarterly".utf8))
            #expect(try files.isFileEncrypted(atPath: path))
            fixture.remote.dropCache()
            #expect(try await files.async.readFile(atPath: path) == Data("quarterly".utf8))

            // A file created exclusively: the first round creates it, needs the key, removes it again; the
            // second round creates it with the key. One file, a working handle.
            fixture.remote.dropCache()
            let logPath = fixture.base.path("log.bin")
            let handle = try await files.async.openProtectedFile(atPath: logPath, options: [.read, .write, .create, .exclusive])
            try handle.write(Array("entry".utf8))
            try handle.seek(to: 0)
            #expect(try handle.readToEnd() == Array("entry".utf8))
            try handle.close()
            fixture.remote.dropCache()
            await #expect(throws: ProtectionError.self) {
                try await files.async.openProtectedFile(atPath: logPath, options: [.read, .write, .create, .exclusive])
            }

            let clear = fixture.base.path("clear.txt")
            writeRaw(Array("plain".utf8), to: clear)
            fixture.remote.dropCache()
            try await files.async.protect(atPath: clear, owner: alice)
            #expect(try files.isFileEncrypted(atPath: clear))
            fixture.remote.dropCache()
            try await files.async.decryptFile(atPath: clear, toPath: fixture.base.path("copy.txt"))
            #expect(bytes(of: fixture.base.path("copy.txt")) == Array("plain".utf8))
            fixture.remote.dropCache()
            try await files.async.protect(atPath: clear, toPath: fixture.base.path("clear.idps"))
            fixture.remote.dropCache()
            try await files.async.unprotect(atPath: fixture.base.path("clear.idps"), toPath: fixture.base.path("back.txt"))
            #expect(bytes(of: fixture.base.path("back.txt")) == Array("plain".utf8))
        }
        #expect(fixture.remote.fetches >= 6)
    }

    @Test("a protected stream opened in a task awaits the key its header names")
    func streamsAwaitKeys() async throws {
        let fixture = try RemoteFixture()
        let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let pieces = stride(from: 0, to: payload.count, by: 4096).map { Array(payload[$0..<min($0 + 4096, payload.count)]) }
        let sealed = try await fixture.data.async.protect(pieces.async, owner: alice, chunkSize: 8192).collect()
        fixture.remote.dropCache()
        let before = fixture.remote.fetches
        // One byte at a time through the header: the key is fetched once, when the header is complete.
        let opened = try await IdentityContext.withThreadIdentity(alice) {
            try await fixture.data.unprotect(sealed.map { [$0] }.async).collect()
        }
        #expect(opened == payload)
        #expect(fixture.remote.fetches == before + 1)
    }

    @Test("async wipes wait for an async write awaiting its key without holding the cooperative threads", .timeLimit(.minutes(10)))
    func asyncWipesWaitWithoutHoldingThePool() async throws {
        // The time limit catches a hang, not a slow run (the whole suite under ThreadSanitizer on two loaded
        // cores takes minutes); the bridge's timeout is past it, so a hang is never ended by a timeout instead.
        let fixture = try RemoteFixture(bridgeTimeout: .seconds(1_200))
        fixture.remote.closeGate()
        let path = fixture.base.path("racing.txt")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await IdentityContext.withThreadIdentity(alice) {
                    try await fixture.files.async.writeFile(atPath: path, contents: Data("in flight".utf8))
                }
            }
            // The write is held at the gate with its creation in flight; two wipes (as many as the pool has
            // threads here) wait for it. Were they waiting on cooperative threads, the write could never go on.
            while fixture.remote.maxInFlight < 1 { try await Task.sleep(for: .milliseconds(5)) }
            for _ in 0..<2 {
                group.addTask {
                    _ = try await IdentityContext.withThreadIdentity(alice) { try await fixture.files.async.removeFiles(ownedBy: alice) }
                }
            }
            try await Task.sleep(for: .milliseconds(100))
            fixture.remote.openGate()
            try await group.waitForAll()
        }
        // The wipes waited for the write, then removed its file.
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("wipes destroy keys through the asynchronous requirement")
    func asyncWipe() async throws {
        let fixture = try RemoteFixture()
        let path = fixture.base.path("alice.txt")
        let keyID = try await IdentityContext.withThreadIdentity(alice) {
            try await fixture.files.async.writeFile(atPath: path, contents: Data("gone soon".utf8))
            let keyID = try #require(try fixture.files.protectionInfo(atPath: path)?.keyID)
            let removed = try await fixture.files.async.removeFiles(ownedBy: alice)
            #expect(removed.count == 1)
            return keyID
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: ProtectionError.keyNotFound(identity: alice, keyID: keyID)) { try fixture.base.keys.key(withID: keyID, for: alice) }
        await #expect(throws: ProtectionError.accessDenied(identity: alice, reader: bob)) {
            try await IdentityContext.withThreadIdentity(bob) { try await fixture.files.async.removeFiles(ownedBy: alice) }
        }
    }
}

/// Runs `body` and returns the runtime issues of `kinds` reported meanwhile (by any thread); they are
/// expected, so not printed.
func capturingIssues<R>(kinds: Set<String>, _ body: () async throws -> R) async rethrows -> (R, [RuntimeIssue]) {
    try await IdentityStrictMode.capturingIssues(matching: { kinds.contains($0.kind) }, body)
}

extension Array where Element: Sendable {
    /// The elements as an `AsyncSequence`.
    var async: AsyncStream<Element> {
        AsyncStream { continuation in
            for element in self { continuation.yield(element) }
            continuation.finish()
        }
    }
}
