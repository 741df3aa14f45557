import Foundation
import IdentityProtection
@testable import IdentityRuntime
import Testing

/// The refusal of a handle whose owner's keys were destroyed: 103, no bytes.
private func expectWiped(_ handle: ProtectedFile, sourceLocation: SourceLocation = #_sourceLocation) {
    let operations: [(String, () throws -> Void)] = [
        ("read", { _ = try handle.read(at: 0, upToCount: 1 << 20) }),
        ("readToEnd", { _ = try handle.readToEnd() }),
        ("write", { try handle.write(Array("overwrite".utf8), at: 0) }),
        ("size", { _ = try handle.size() }),
        ("truncate", { try handle.truncate(to: 0) }),
        ("seek", { try handle.seek(to: 0) }),
        ("synchronize", { try handle.synchronize() }),
    ]
    for (name, operation) in operations {
        do {
            try operation()
            Issue.record("\(name) on a wiped handle succeeded", sourceLocation: sourceLocation)
        } catch let error as ProtectionError {
            #expect(error.code == 103, "\(name): \(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(name): \(error)", sourceLocation: sourceLocation)
        }
    }
}

@Suite("Wiped handles: an open ProtectedFile stops when its owner's keys are destroyed, for good")
struct WipedHandleTests {
    enum Wipe: String, CaseIterable, Sendable {
        case removeFiles, asyncRemoveFiles, destroyKeys
    }

    static func open(_ fixture: Fixture, _ name: String) throws -> ProtectedFile {
        try IdentityContext.withThreadIdentity(alice) {
            let file = try fixture.files.openProtectedFile(atPath: fixture.path(name), options: [.read, .write, .create])
            try file.write(Array("alice's plaintext".utf8))
            return file
        }
    }

    static func wipe(_ fixture: Fixture, _ wipe: Wipe) async throws {
        switch wipe {
        case .removeFiles:
            try IdentityContext.withThreadIdentity(alice) { _ = try fixture.files.removeFiles(ownedBy: alice) }
        case .asyncRemoveFiles:
            try await IdentityContext.withThreadIdentity(alice) { _ = try await fixture.files.async.removeFiles(ownedBy: alice) }
        case .destroyKeys:
            try fixture.keys.destroyKeys(for: alice)
        }
    }

    @Test("encrypted and plain handles refuse every operation (103) after the wipe, even once the account has a new key",
          arguments: Wipe.allCases, [true, false])
    func refusedAfterWipe(_ wipe: Wipe, encrypted: Bool) async throws {
        let fixture = try Fixture(encryptionRequired: encrypted)
        let reader = try Self.open(fixture, "ledger.bin")
        let other = try IdentityContext.withThreadIdentity(bob) {
            try fixture.files.openProtectedFile(atPath: fixture.path("bob.bin"), options: [.read, .write, .create])
        }
        #expect(reader.isEncrypted == encrypted)
        #expect(try reader.read(at: 0, upToCount: 100) == Array("alice's plaintext".utf8))

        try await Self.wipe(fixture, wipe)
        expectWiped(reader)
        // Another account's handle is untouched.
        try other.write(Array("bob".utf8), at: 0)
        #expect(try other.read(at: 0, upToCount: 10) == Array("bob".utf8))

        // The account comes back under the same name with a new key and new data: the old handle stays dead,
        // a new one works.
        _ = try fixture.keys.currentKey(for: alice)
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.writeFile(atPath: fixture.path("ledger.bin"), contents: Data("new data".utf8))
        }
        expectWiped(reader)
        let fresh = try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.openProtectedFile(atPath: fixture.path("ledger.bin"), options: [.read])
        }
        #expect(try fresh.readToEnd() == Array("new data".utf8))
        try reader.close()
    }

    @Test("a wipe of one key store leaves handles opened with another store's keys alone")
    func otherStoresUntouched() throws {
        let first = try Fixture()
        let second = try Fixture()
        let handle = try Self.open(second, "ledger.bin")
        try first.keys.destroyKeys(for: alice)
        #expect(try handle.read(at: 0, upToCount: 100) == Array("alice's plaintext".utf8))
    }

    @Test("handles used from many threads while their owner is wiped: plaintext before, 103 after, never bytes after",
          arguments: [1, 2, 4, 8])
    func concurrentWipe(_ threads: Int) async throws {
        let fixture = try Fixture()
        let handles = try (0..<threads).map { try Self.open(fixture, "file\($0).bin") }
        let wiped = LockedValue(false)
        let afterWipe = LockedValue(0)
        await withTaskGroup(of: Void.self) { group in
            for handle in handles {
                group.addTask {
                    for _ in 0..<200 {
                        let done = wiped.withLock { $0 }
                        do {
                            let bytes = try handle.read(at: 0, upToCount: 100)
                            #expect(bytes == Array("alice's plaintext".utf8))
                            if done { afterWipe.withLock { $0 += 1 } }
                            try handle.write(Array("alice's".utf8), at: 0)
                        } catch let error as ProtectionError {
                            #expect(error.code == 103)
                        } catch {
                            Issue.record("\(error)")
                        }
                        await Task.yield()
                    }
                }
            }
            group.addTask {
                let removed = try? IdentityContext.withThreadIdentity(alice) { try fixture.files.removeFiles(ownedBy: alice) }
                wiped.withLock { $0 = true }
                #expect(removed?.count == threads)
            }
        }
        // Once the wipe returned, no handle handed out a byte.
        #expect(afterWipe.withLock { $0 } == 0)
        for handle in handles { expectWiped(handle) }
    }
}
