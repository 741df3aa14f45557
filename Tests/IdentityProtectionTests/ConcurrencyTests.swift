import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("Protection under concurrency")
struct ConcurrencyTests {
    static let identities: [Identity] = [alice, bob, carol, mallory, .unmanaged]

    @Test("threads: protect, write and encrypt under different identities; owners match the writer",
          arguments: [1, 4, 16])
    func threads(threadCount: Int) throws {
        let f = try Fixture(chunkSize: 64)
        let perThread = longTests ? 200 : 12
        DispatchQueue.concurrentPerform(iterations: threadCount) { thread in
            let identity = Self.identities[thread % Self.identities.count]
            IdentityContext.withThreadIdentity(identity) {
                for i in 0..<perThread {
                    let payload = Data("t\(thread)-\(i)".utf8)
                    do {
                        let sealed = try f.data.protect(payload)
                        #expect(try f.data.protectionInfo(sealed)?.owner == identity)
                        #expect(try f.data.unprotect(sealed) == payload)
                        let path = f.path("t\(thread)-\(i).txt")
                        try f.files.writeFile(atPath: path, contents: payload)
                        let info = try f.files.protectionInfo(atPath: path)
                        #expect(info?.owner == identity)
                        #expect(info?.isEncrypted == f.policy.isFileEncryptionRequired(for: identity))
                        #expect(try f.files.readFile(atPath: path) == payload)
                        if i % 4 == 0, f.policy.isManaged(identity) {
                            try f.files.decryptFile(atPath: path)
                            try f.files.encryptFile(atPath: path)
                            #expect(try f.files.protectionInfo(atPath: path)?.owner == identity)
                        }
                    } catch {
                        Issue.record("thread \(thread) as \(identity): \(error)")
                    }
                }
            }
        }
        let count = try FileManager.default.contentsOfDirectory(atPath: f.root).count
        #expect(count == threadCount * perThread)
    }

    @Test("tasks: many tasks under different identities, index-only owners, then a wipe")
    func tasks() async throws {
        let f = try Fixture(ownerStorage: .indexOnly, chunkSize: 32)
        let perIdentity = longTests ? 100 : 8
        try await withThrowingTaskGroup(of: Void.self) { group in
            for identity in Self.identities {
                for i in 0..<perIdentity {
                    group.addTask {
                        try await IdentityContext.withThreadIdentity(identity) {
                            await Task.yield()
                            let path = f.path("\(identity.name.isEmpty ? "none" : identity.name)-\(i)")
                            let payload = Data(repeating: UInt8(i), count: i * 10)
                            try f.files.writeFile(atPath: path, contents: payload)
                            await Task.yield()
                            #expect(try f.files.protectionInfo(atPath: path)?.owner == identity)
                            let sealed = try f.data.protect(payload)
                            #expect(try f.data.unprotect(sealed) == payload)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let removed = try f.files.removeFiles(ownedBy: bob)
        #expect(removed.count == perIdentity)
        #expect(try FileManager.default.contentsOfDirectory(atPath: f.root).count == perIdentity * (Self.identities.count - 1))
    }

    @Test("key store: concurrent first use and rotation give one consistent key ring")
    func keyStoreRace() throws {
        let f = try Fixture()
        // NSLock (a pthread mutex) rather than Synchronization.Mutex: ThreadSanitizer sees pthread locks.
        let sealed = LockedBox<[Data]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            do {
                if i % 3 == 0 { try f.keys.rotateKey(for: alice) }
                let data = try f.data.protect(Data("\(i)".utf8), owner: alice)
                sealed.withLock { $0.append(data) }
            } catch {
                Issue.record("\(error)")
            }
        }
        let reopened = DataProtectionManager(keyStore: try FileKeyStore(atPath: f.keys.directory), policy: f.policy)
        for data in sealed.withLock({ $0 }) {
            #expect(throws: Never.self) { _ = try reopened.unprotect(data) }
        }
    }
}

final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
