import Foundation
import IdentityProtection
@testable import IdentityRuntime
import Testing

// Adversarial tests of the asynchronous key-store path (StoreBridge, the managers' `async` entry points).
// Each test asserts the SAFE behaviour; a test whose name starts with `hole_` failed when it was written and
// shows a hole (see the commit message).

/// Runs `body` on a GCD worker (where the synchronous API may block) and returns its result.
private func onDispatchThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        DispatchQueue.global().async { continuation.resume(returning: body()) }
    }
}

private func result<T>(_ body: () throws(ProtectionError) -> T) -> Result<T, ProtectionError> {
    do throws(ProtectionError) { return .success(try body()) } catch { return .failure(error) }
}

/// A remote-style store whose fetch of a current key reads the database at once, then suspends at a gate
/// before answering (the answer is on its way back over the network).
final class PauseAfterFetchStore: KeyStore {
    private struct State {
        var fetched = 0
        var gate: [CheckedContinuation<Void, Never>]? = []
    }

    let database: FileKeyStore
    private let state = LockedValue(State())

    init(database: FileKeyStore) { self.database = database }

    var fetched: Int { state.withLock { $0.fetched } }

    func openGate() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            defer { state.gate = nil }
            return state.gate ?? []
        }
        waiting.forEach { $0.resume() }
    }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try StoreBridge.wait(
            for: "current:\(identity.name)", operation: "current key of \(identity.name)", timeout: .seconds(10),
            timedOut: ProtectionError.keyStoreUnavailable(reason: "no answer")
        ) { () async throws(ProtectionError) in
            try await self.currentKey(for: identity, deadline: .now + .seconds(10))
        }
    }

    func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        let key = try database.currentKey(for: identity)
        state.withLock { $0.fetched += 1 }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = state.withLock { state -> Bool in
                guard state.gate != nil else { return false }
                state.gate!.append(continuation)
                return true
            }
            if !waiting { continuation.resume() }
        }
        return key
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try database.key(withID: id, for: identity)
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try database.rotateKey(for: identity)
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try database.destroyKeys(for: identity)
    }
}

/// A store in migration: keys are looked up in the new database, and in the old one when the new one does not
/// have them (both remote, both bridged, as two `PostgresKeyStore`s would be).
final class MigratingKeyStore: KeyStore {
    let primary: RemoteKeyStoreDouble
    let fallback: RemoteKeyStoreDouble

    init(primary: RemoteKeyStoreDouble, fallback: RemoteKeyStoreDouble) {
        self.primary = primary
        self.fallback = fallback
    }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try primary.currentKey(for: identity)
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        do throws(ProtectionError) {
            return try primary.key(withID: id, for: identity)
        } catch .keyNotFound {
            return try fallback.key(withID: id, for: identity)
        }
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try primary.rotateKey(for: identity) }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try primary.destroyKeys(for: identity)
        try fallback.destroyKeys(for: identity)
    }
}

/// A caching store over another remote store's synchronous API (as a `PostgresKeyStore` calls its synchronous
/// `KeyEncryptionKeyProvider`, which, backed by a remote KMS, bridges its own misses).
final class LayeredKeyStore: KeyStore {
    let inner: RemoteKeyStoreDouble

    init(inner: RemoteKeyStoreDouble) { self.inner = inner }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try StoreBridge.wait(
            for: "layered-current:\(identity.name)", operation: "layered current key of \(identity.name)", timeout: .seconds(5),
            timedOut: ProtectionError.keyStoreUnavailable(reason: "layered: no answer in 5 s")
        ) { () async throws(ProtectionError) in
            try await self.currentKey(for: identity, deadline: .now + .seconds(5))
        }
    }

    func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try inner.currentKey(for: identity)   // the inner layer's synchronous API
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.key(withID: id, for: identity)
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) { try inner.destroyKeys(for: identity) }
}

/// A store whose fetch blocks its thread (a synchronous client library, a hung NFS mount under a local
/// store) until released.
final class ThreadBlockingStore: KeyStore {
    let release = DispatchSemaphore(value: 0)

    private func block() { release.wait() }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try StoreBridge.wait(
            for: "blocking:\(identity.name)", operation: "blocking", timeout: .milliseconds(200),
            timedOut: ProtectionError.keyStoreUnavailable(reason: "blocking store: no answer in 200 ms")
        ) { () async throws(ProtectionError) -> ProtectionKey in
            self.block()
            throw ProtectionError.keyStoreUnavailable(reason: "released")
        }
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        throw .keyNotFound(identity: identity, keyID: id)
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { throw .keyStoreUnavailable(reason: "n/a") }
    func destroyKeys(for identity: Identity) throws(ProtectionError) {}
}

@Suite("StoreBridge attacks: re-runs, wipes, nested and stalled fetches, answer keys, deadlines", .serialized)
struct StoreBridgeAttackTests {
    // MARK: Re-run vs wipe

    /// Found by review: the asynchronous write left `creating(for:)` between its rounds, so a wipe meanwhile did not
    /// wait for it and the second round wrote a file under a key the wipe destroyed. A round that stops to await
    /// a key now keeps its creation in flight until the run ends, as the synchronous write does.
    @Test("a wipe between the rounds of an async write leaves no file behind under a destroyed key")
    func wipeBetweenRoundsLeavesNoSurvivor() async throws {
        let base = try Fixture(isolated: true)
        let store = PauseAfterFetchStore(database: base.keys)
        let files = try FileProtectionManager(
            roots: [base.root], keyStore: store, policy: base.policy, stateDirectory: base.directory + "/state-pause")
        let path = base.path("late.txt")
        let write = Task {
            try await IdentityContext.withThreadIdentity(alice) {
                try await files.async.writeFile(atPath: path, contents: Data("written after the wipe?".utf8))
            }
        }
        var spins = 0
        while store.fetched == 0 && spins < 2_000 { try await Task.sleep(for: .milliseconds(5)); spins += 1 }
        #expect(store.fetched == 1)
        // The wipe of alice: her files go, her keys are destroyed.
        _ = try IdentityContext.withThreadIdentity(alice) { try files.removeFiles(ownedBy: alice) }
        store.openGate()
        let outcome = await write.result
        let exists = FileManager.default.fileExists(atPath: path)
        if exists {
            let read = IdentityContext.withThreadIdentity(alice) { result { () throws(ProtectionError) in try files.readFile(atPath: path) } }
            // SAFE: whatever survives the wipe (or was written after it) is readable with a key that exists.
            #expect(throws: Never.self, "the write reported \(outcome) and left a file the owner cannot read: \(read)") { try read.get() }
        }
    }

    /// The control: the same interleaving with the synchronous write (on a GCD thread, blocked on the same
    /// gate): the wipe waits for the write in flight and removes its file.
    @Test("control: a wipe during a synchronous write's key fetch waits for it and leaves nothing behind")
    func wipeDuringSynchronousWriteLeavesNothing() async throws {
        let base = try Fixture(isolated: true)
        let store = PauseAfterFetchStore(database: base.keys)
        let files = try FileProtectionManager(
            roots: [base.root], keyStore: store, policy: base.policy, stateDirectory: base.directory + "/state-pause")
        let path = base.path("late.txt")
        async let write: Result<Void, ProtectionError> = onDispatchThread {
            IdentityContext.withThreadIdentity(alice) {
                result { () throws(ProtectionError) in try files.writeFile(atPath: path, contents: Data("x".utf8)) }
            }
        }
        var spins = 0
        while store.fetched == 0 && spins < 2_000 { try await Task.sleep(for: .milliseconds(5)); spins += 1 }
        async let wipe: Result<[String], ProtectionError> = onDispatchThread {
            IdentityContext.withThreadIdentity(alice) { result { () throws(ProtectionError) in try files.removeFiles(ownedBy: alice) } }
        }
        try await Task.sleep(for: .milliseconds(200))
        store.openGate()
        let (written, wiped) = await (write, wipe)
        #expect(throws: Never.self) { try written.get() }
        #expect(try wiped.get() == [path])
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    // MARK: First rounds leave owner records behind

    /// Found by review: a first round that created a file (ProtectedFile `.create`, or the temporary file of an
    /// atomic write) recorded its owner by inode in the index, needed the key, and unlinked the file but not its
    /// index entry, so the next file on that inode inherited the owner. Removed files now lose their entry.
    @Test("an async open that fetched a key leaves no owner record for the inode it unlinked (index storage)")
    func firstRoundLeavesNoOwnerRecord() async throws {
        let base = try Fixture(ownerStorage: .indexOnly, isolated: true)
        let remote = RemoteKeyStoreDouble(database: base.keys, bridgeTimeout: .seconds(300))
        let files = try FileProtectionManager(
            roots: [base.root], keyStore: remote, policy: base.policy, stateDirectory: base.directory + "/state-remote",
            ownerStorage: .indexOnly)
        remote.closeGate()
        let open = Task {
            try await IdentityContext.withThreadIdentity(alice) {
                let file = try await files.async.openProtectedFile(atPath: base.path("alice.log"), options: [.read, .write, .create])
                try file.close()
            }
        }
        var spins = 0
        while remote.fetches == 0 && spins < 2_000 { try await Task.sleep(for: .milliseconds(5)); spins += 1 }
        // Meanwhile plain files appear in the root (another program, or bob's app writing without the manager).
        let plain = (0..<8).map { base.path("plain-\($0).txt") }
        for path in plain { writeRaw(Array("not alice's".utf8), to: path) }
        let owners = plain.map { path in (path, try? files.protectionInfo(atPath: path)?.owner) }
        remote.openGate()
        try await open.value
        for (path, owner) in owners {
            #expect(owner == nil, "\(path) has no owner, but the index says \(String(describing: owner))")
        }
        // The consequence: alice's wipe deletes them.
        _ = try IdentityContext.withThreadIdentity(alice) { try files.removeFiles(ownedBy: alice) }
        for path in plain { #expect(FileManager.default.fileExists(atPath: path), "\(path) was wiped as alice's") }
    }

    // MARK: Answer keys

    /// Found by review: two stores that named their requests the same way shared answers inside one run. The
    /// stores now put their own identity in the request's key (and the bridge the answer's type).
    @Test("answers recorded in a run are per store: a fallback store is asked, as in the synchronous call")
    func answersAreNotSharedBetweenStores() async throws {
        let base = try Fixture(isolated: true)
        let sealed = try base.data.protect(Data("from the old database".utf8), owner: alice)
        let newDatabase = try FileKeyStore(atPath: base.directory + "/keys-new")
        let store = MigratingKeyStore(
            primary: RemoteKeyStoreDouble(database: newDatabase, latency: .milliseconds(5)),
            fallback: RemoteKeyStoreDouble(database: base.keys, latency: .milliseconds(5)))
        let data = DataProtectionManager(keyStore: store, policy: base.policy)

        let synchronous = await onDispatchThread {
            IdentityContext.withThreadIdentity(alice) { result { () throws(ProtectionError) in try data.unprotect(sealed) } }
        }
        #expect(try synchronous.get() == Data("from the old database".utf8))

        store.primary.dropCache()
        store.fallback.dropCache()
        let asynchronous = await IdentityContext.withThreadIdentity(alice) { () async -> Result<Data, ProtectionError> in
            do throws(ProtectionError) { return .success(try await data.async.unprotect(sealed)) } catch { return .failure(error) }
        }
        #expect(throws: Never.self, "sync: \(synchronous), async: \(asynchronous)") { try asynchronous.get() }
        #expect(try asynchronous.get() == Data("from the old database".utf8))
    }

    // MARK: Nested and stalled fetches on the blocking path

    /// Found by review: the blocking path ran every fetch on one thread, so a fetch that itself waited on a bridged
    /// store never got its inner answer. Each blocking wait's fetch now has a thread of its own.
    @Test("a fetch that calls another bridged store's synchronous API answers on a GCD thread")
    func nestedBridgeOnBlockingPath() async throws {
        let base = try Fixture(isolated: true)
        // Before the fix the inner wait always ended with its timeout: the answer was 113.
        let inner = RemoteKeyStoreDouble(database: base.keys, latency: .milliseconds(10), bridgeTimeout: .seconds(10))
        let layered = LayeredKeyStore(inner: inner)
        let answer = await onDispatchThread { result { () throws(ProtectionError) in try layered.currentKey(for: alice) } }
        #expect(throws: Never.self, "\(answer)") { try answer.get() }
        // The same through the async entry point (the inner wait blocks a cooperative thread, but answers).
        let data = DataProtectionManager(keyStore: LayeredKeyStore(inner: RemoteKeyStoreDouble(database: base.keys)), policy: base.policy)
        let sealed = try await data.async.protect(Data("x".utf8), owner: alice)
        #expect(try base.data.protectionInfo(sealed)?.owner == alice)
    }

    /// Found by review: one store whose fetch blocked its thread stalled every other store's synchronous waits.
    @Test("a store whose fetch blocks does not make a healthy store's synchronous calls time out")
    func stalledFetchDoesNotStallOtherStores() async throws {
        let base = try Fixture(isolated: true)
        let stuck = ThreadBlockingStore()
        defer { stuck.release.signal() }
        let first = await onDispatchThread { result { () throws(ProtectionError) in try stuck.currentKey(for: alice) } }
        #expect(first.isFailure)   // expected: the stuck store times out
        let healthy = RemoteKeyStoreDouble(database: base.keys, latency: .milliseconds(10), bridgeTimeout: .seconds(10))
        let started = ContinuousClock.now
        let answer = await onDispatchThread { result { () throws(ProtectionError) in try healthy.currentKey(for: bob) } }
        let elapsed = ContinuousClock.now - started
        #expect(throws: Never.self, "the healthy store, after \(elapsed): \(answer)") { try answer.get() }
    }

    // MARK: Deadlines

    /// Found by review: the asynchronous path awaited a fetch for as long as it took. The bridge's `timeout` now
    /// bounds both paths, and cancelling the calling task ends the wait.
    @Test("an async call on a store that does not answer ends (timeout or cancellation), as the synchronous one does", .timeLimit(.minutes(10)))
    func asyncCallEndsWhenStoreNeverAnswers() async throws {
        let fixture = try RemoteFixture(bridgeTimeout: .milliseconds(200))
        fixture.remote.closeGate()
        defer { fixture.remote.openGate() }
        let synchronous = await onDispatchThread {
            result { () throws(ProtectionError) in try fixture.data.protect(Data("x".utf8), owner: alice) }
        }
        #expect(synchronous.failureCode == 113)

        // Ends by the timeout, the gate still closed (a call that waited for the gate would hang the test
        // until its time limit).
        let timedOut = await Task {
            try await fixture.data.async.protect(Data("x".utf8), owner: bob)
        }.result
        var code: Int?
        if case let .failure(error) = timedOut { code = (error as? ProtectionError)?.code }
        #expect(code == 113)

        // Ends when its task is cancelled, with a timeout past the test's time limit.
        let patient = try RemoteFixture(bridgeTimeout: .seconds(1_200))
        patient.remote.closeGate()
        defer { patient.remote.openGate() }
        let call = Task { try await patient.data.async.protect(Data("x".utf8), owner: bob) }
        while patient.remote.maxInFlight < 1 { try await Task.sleep(for: .milliseconds(5)) }
        call.cancel()
        #expect((try? await call.value) == nil)
    }

    // MARK: Concurrent identities

    @Test("concurrent async calls of two accounts on a cold store: each gets its own key, neither reads the other's")
    func concurrentAccountsStayApart() async throws {
        let fixture = try RemoteFixture(latency: .milliseconds(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<48 {
                let me = index % 2 == 0 ? alice : bob
                let other = index % 2 == 0 ? bob : alice
                group.addTask {
                    let payload = Data("\(me.name) #\(index)".utf8)
                    let sealed = try await IdentityContext.withThreadIdentity(me) { try await fixture.data.async.protect(payload) }
                    #expect(try fixture.data.protectionInfo(sealed)?.owner == me)
                    if index % 3 == 0 { fixture.remote.dropCache() }
                    let opened = try await IdentityContext.withThreadIdentity(me) { try await fixture.data.async.unprotect(sealed) }
                    #expect(opened == payload)
                    await #expect(throws: ProtectionError.accessDenied(identity: me, reader: other)) {
                        try await IdentityContext.withThreadIdentity(other) { try await fixture.data.async.unprotect(sealed) }
                    }
                    // Streams too: the header's key is awaited under the reader fixed at the call.
                    let stream = try await fixture.data.async.protect([Array(payload)].async, owner: me, chunkSize: 16).collect()
                    if index % 4 == 0 { fixture.remote.dropCache() }
                    let back = try await IdentityContext.withThreadIdentity(me) {
                        try await fixture.data.unprotect(stream.map { [$0] }.async).collect()
                    }
                    #expect(back == Array(payload))
                    await #expect(throws: ProtectionError.self) {
                        _ = try await IdentityContext.withThreadIdentity(other) {
                            try await fixture.data.unprotect(stream.map { [$0] }.async).collect()
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    // MARK: A protected stream iterated twice

    /// Found by review (older than the async entry points): every iterator of a sealing stream sealed with the
    /// same stream key and nonces, so a base that yields other bytes the second time gave two ciphertexts under
    /// one (key, nonce). Each iteration now draws its own salt.
    @Test("iterating a sealing stream twice never reuses a (key, nonce) pair")
    func secondIterationReusesNonces() async throws {
        let fixture = try RemoteFixture()
        let box = LockedValue(Array(repeating: UInt8(0x41), count: 64))
        let stream = try await fixture.data.async.protect(ChangingSource(box: box), owner: alice, chunkSize: 64)
        let first = try await stream.collect()
        box.withLock { $0 = Array(repeating: UInt8(0x42), count: 64) }
        let second = try await stream.collect()
        let common = zip(first, second).prefix { $0 == $1 }.count
        let xors = zip(first[common...], second[common...]).prefix(64).map { $0 ^ $1 }
        #expect(!(xors.count == 64 && xors.allSatisfy { $0 == 0x41 ^ 0x42 }),
                "the two envelopes share \(common) leading bytes (header and salt) and their bodies XOR to the plaintexts' XOR")
    }

    // MARK: Re-runs of file operations: same outcome as the synchronous call

    @Test("async .truncate of an existing encrypted file on a cold store: one handle, the data replaced, as synchronously")
    func truncateRerun() async throws {
        let fixture = try RemoteFixture()
        let path = fixture.base.path("t.bin")
        try await IdentityContext.withThreadIdentity(alice) {
            try await fixture.files.async.writeFile(atPath: path, contents: Data("old content".utf8))
            fixture.remote.dropCache()
            let file = try await fixture.files.async.openProtectedFile(atPath: path, options: [.read, .write, .truncate])
            try file.write(Array("new".utf8))
            try file.close()
            fixture.remote.dropCache()
            #expect(try await fixture.files.async.readFile(atPath: path) == Data("new".utf8))
        }
        // bob may not truncate alice's file, cold store or not; nothing is touched and nothing fetched for bob.
        fixture.remote.dropCache()
        let before = fixture.remote.fetches
        await #expect(throws: ProtectionError.self) {
            try await IdentityContext.withThreadIdentity(bob) {
                _ = try await fixture.files.async.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: bob)
            }
        }
        #expect(fixture.remote.fetches == before)
        #expect(try IdentityContext.withThreadIdentity(alice) { try fixture.base.files.readFile(atPath: path) } == Data("new".utf8))
    }

    @Test("async file-to-file streams over an existing destination of another account are refused before any fetch")
    func streamOverOtherAccountsDestination() async throws {
        let fixture = try RemoteFixture()
        let source = fixture.base.path("src.txt")
        let destination = fixture.base.path("dst.idps")
        try IdentityContext.withThreadIdentity(alice) { try fixture.base.files.writeFile(atPath: destination, contents: Data("alice's".utf8)) }
        try IdentityContext.withThreadIdentity(bob) { try fixture.base.files.writeFile(atPath: source, contents: Data("bob's".utf8)) }
        fixture.remote.dropCache()
        let before = fixture.remote.fetches
        await #expect(throws: ProtectionError.self) {
            try await IdentityContext.withThreadIdentity(bob) {
                try await fixture.files.async.protect(atPath: source, toPath: destination)
            }
        }
        await #expect(throws: ProtectionError.self) {
            try await IdentityContext.withThreadIdentity(bob) {
                try await fixture.files.async.decryptFile(atPath: source, toPath: destination)
            }
        }
        #expect(fixture.remote.fetches == before)
        #expect(try IdentityContext.withThreadIdentity(alice) { try fixture.base.files.readFile(atPath: destination) } == Data("alice's".utf8))
    }
}

extension Result where Failure == ProtectionError {
    var isFailure: Bool { if case .failure = self { return true } else { return false } }
    var failureCode: Int? { if case let .failure(error) = self { return error.code } else { return nil } }
}

/// A base sequence that yields the box's bytes at the time each iterator is made.
struct ChangingSource: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    let box: LockedValue<[UInt8]>

    struct AsyncIterator: AsyncIteratorProtocol {
        var bytes: [UInt8]?
        mutating func next() async -> [UInt8]? {
            defer { bytes = nil }
            return bytes
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: box.withLock { $0 }) }
}
