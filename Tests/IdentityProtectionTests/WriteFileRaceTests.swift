import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Testing

/// A key store that holds `gated`'s first request for its current key (the first after ``arm()``, when made
/// disarmed) until ``release()``: a write of that account between its look at the destination and its file
/// taking the name.
private final class FirstKeyGate: KeyStore {
    let inner: FileKeyStore
    let gated: Identity
    let reached = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)
    private let armed: LockedFlag

    init(_ inner: FileKeyStore, gated: Identity, armed: Bool = true) {
        self.inner = inner
        self.gated = gated
        self.armed = LockedFlag(taken: !armed)
    }

    func arm() { armed.reset() }
    func release() { gate.signal() }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if identity == gated, armed.takeFirst() {
            reached.signal()
            gate.wait()
        }
        return try inner.currentKey(for: identity)
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.key(withID: id, for: identity)
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) { try inner.destroyKeys(for: identity) }
}

/// `true` once, then `false` (until ``reset()``).
private final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var taken: Bool

    init(taken: Bool) {
        self.taken = taken
    }

    func reset() {
        lock.lock()
        taken = false
        lock.unlock()
    }

    func takeFirst() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        defer { taken = true }
        return !taken
    }
}

/// A result set once by one thread and waited for by another.
private final class LockedResult: @unchecked Sendable {
    private let condition = NSCondition()
    private var result: Result<Void, ProtectionError>?

    func set(_ value: Result<Void, ProtectionError>) {
        condition.lock()
        result = value
        condition.broadcast()
        condition.unlock()
    }

    func wait() -> Result<Void, ProtectionError> {
        condition.lock()
        defer { condition.unlock() }
        while result == nil { condition.wait() }
        return result!
    }
}

@Suite("writeFile to a free name that another file takes first: decided again, never replaced unchecked")
struct WriteFileRaceTests {
    static let outsider: Identity = "dave@northwind.com"

    private struct Setup {
        let directory: String
        let files: FileProtectionManager
        let keys: FirstKeyGate

        init(armed: Bool = true) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("idp-race-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory + "/root", withIntermediateDirectories: true)
            keys = FirstKeyGate(try FileKeyStore(atPath: directory + "/keys"), gated: alice, armed: armed)
            let policy = StaticManagedIdentityPolicy(managed: [alice, WriteFileRaceTests.outsider], fileEncryptionRequired: true, dataIsolation: true)
            files = try FileProtectionManager(
                roots: [directory + "/root"], keyStore: keys, policy: policy, stateDirectory: directory + "/state", ownerStorage: .indexOnly)
        }
    }

    /// Starts alice's write of `path` on a thread of its own (it blocks there, never on the cooperative pool)
    /// and returns once it has looked at the destination and waits for its key; the result comes when it ends.
    private func aliceWritesAfterHerLook(_ setup: Setup, _ path: String) async -> () async -> Result<Void, ProtectionError> {
        let outcome = LockedResult()
        let writer = Thread {
            do throws(ProtectionError) {
                try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
                    try setup.files.writeFile(atPath: path, contents: Data("alice's".utf8))
                }
                outcome.set(.success(()))
            } catch {
                outcome.set(.failure(error))
            }
        }
        writer.start()
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { setup.keys.reached.wait(); continuation.resume() }
        }
        return {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: outcome.wait()) }
            }
        }
    }

    /// Alice's write ended refused as a hand-over of dave's file, which keeps its owner and bytes.
    private func expectRefusedHandOver(
        _ outcome: Result<Void, ProtectionError>, leaving path: String, _ setup: Setup,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        guard case let .failure(error) = outcome else {
            Issue.record("alice's write replaced dave's file without a check", sourceLocation: sourceLocation)
            return
        }
        guard case .accessDenied = error else {
            Issue.record("expected accessDenied (a refused hand-over), got \(error)", sourceLocation: sourceLocation)
            return
        }
        #expect(try setup.files.protectionInfo(atPath: path)?.owner == Self.outsider, sourceLocation: sourceLocation)
        let bytes = try IdentityContext.withThreadIdentity(Self.outsider) { () throws(ProtectionError) in try setup.files.readFile(atPath: path) }
        #expect(bytes == Data("dave's".utf8), sourceLocation: sourceLocation)
    }

    @Test("another tenant's file appears at the free name: alice's write is refused as a hand-over, the file keeps its bytes and owner")
    func anotherTenantsFileTakesTheName() async throws {
        let setup = try Setup()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let path = setup.directory + "/root/report.txt"
        let alicesWrite = await aliceWritesAfterHerLook(setup, path)
        try IdentityContext.withThreadIdentity(Self.outsider) { () throws(ProtectionError) in
            try setup.files.writeFile(atPath: path, contents: Data("dave's".utf8))
        }
        setup.keys.release()

        let outcome = await alicesWrite()
        try expectRefusedHandOver(outcome, leaving: path, setup)
        #expect(try FileManager.default.contentsOfDirectory(atPath: setup.directory + "/root") == ["report.txt"])
    }

    @Test("alice's own file appears at the free name: her write is decided again and replaces it")
    func ownFileTakesTheName() async throws {
        let setup = try Setup()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let path = setup.directory + "/root/notes.txt"
        let alicesWrite = await aliceWritesAfterHerLook(setup, path)
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try setup.files.writeFile(atPath: path, contents: Data("first".utf8))
        }
        setup.keys.release()

        if case let .failure(error) = await alicesWrite() { Issue.record("\(error)") }
        let bytes = try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in try setup.files.readFile(atPath: path) }
        #expect(bytes == Data("alice's".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: setup.directory + "/root") == ["notes.txt"])
    }

    @Test("another tenant's file replaces the file alice checked before her write takes the name: her write is decided again and refused; that file stays")
    func checkedFileReplacedBeforeTheRename() async throws {
        let setup = try Setup(armed: false)
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let path = setup.directory + "/root/shared.txt"
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try setup.files.writeFile(atPath: path, contents: Data("alice's first".utf8))
        }
        let elsewhere = setup.directory + "/root/dave.txt"
        try IdentityContext.withThreadIdentity(Self.outsider) { () throws(ProtectionError) in
            try setup.files.writeFile(atPath: elsewhere, contents: Data("dave's".utf8))
        }
        setup.keys.arm()
        let alicesWrite = await aliceWritesAfterHerLook(setup, path)
        // Another process moves dave's file over the one alice checked (as rename(2) lets it).
        #expect(rename(elsewhere, path) == 0)
        setup.keys.release()

        let outcome = await alicesWrite()
        try expectRefusedHandOver(outcome, leaving: path, setup)
    }
}
