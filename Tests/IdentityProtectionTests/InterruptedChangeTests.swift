import Foundation
import IdentityProtection
@testable import IdentityRuntime
import Testing

/// Every operation that changes a file, interrupted while it waits for a key: the store gives up in time
/// (113), or the asynchronous call is cancelled at that suspension point. Each must leave every file under
/// the roots, and every owner record, exactly as they were.
@Suite("Interrupted changes: a refused, timed-out or cancelled operation leaves files and owners as they were")
struct InterruptedChangeTests {
    /// One mutating operation, run by alice on the fixture's files.
    struct Change: Sendable, CustomTestStringConvertible {
        let name: String
        let run: @Sendable (FileProtectionManager, FilePaths) throws(ProtectionError) -> Void
        var testDescription: String { name }
    }

    /// The files the changes work on.
    struct FilePaths: Sendable {
        let document: String     // alice's, encrypted
        let other: String        // alice's, encrypted (a destination that exists)
        let envelope: String     // alice's protected stream
        let fresh: String        // nothing there
    }

    static let changes: [Change] = [
        Change(name: "ProtectedFile open with truncation") { files, paths throws(ProtectionError) in
            _ = try files.openProtectedFile(atPath: paths.document, options: [.read, .write, .truncate])
        },
        Change(name: "ProtectedFile open that creates") { files, paths throws(ProtectionError) in
            _ = try files.openProtectedFile(atPath: paths.fresh, options: [.read, .write, .create])
        },
        Change(name: "ProtectedFile exclusive create") { files, paths throws(ProtectionError) in
            _ = try files.openProtectedFile(atPath: paths.fresh, options: [.write, .create, .exclusive])
        },
        Change(name: "writeFile over a file") { files, paths throws(ProtectionError) in
            try files.writeFile(atPath: paths.document, contents: Data("replacement".utf8))
        },
        Change(name: "writeFile of a new file") { files, paths throws(ProtectionError) in
            try files.writeFile(atPath: paths.fresh, contents: Data("new".utf8))
        },
        Change(name: "protect: re-own") { files, paths throws(ProtectionError) in
            try files.protect(atPath: paths.document, owner: bob)
        },
        Change(name: "encryptFile for another owner") { files, paths throws(ProtectionError) in
            try files.encryptFile(atPath: paths.document, owner: bob)
        },
        Change(name: "decryptFile in place") { files, paths throws(ProtectionError) in
            try files.decryptFile(atPath: paths.document)
        },
        Change(name: "decryptFile to a copy") { files, paths throws(ProtectionError) in
            try files.decryptFile(atPath: paths.document, toPath: paths.other)
        },
        Change(name: "protect to a stream file") { files, paths throws(ProtectionError) in
            try files.protect(atPath: paths.document, toPath: paths.other)
        },
        Change(name: "unprotect a stream file") { files, paths throws(ProtectionError) in
            try files.unprotect(atPath: paths.envelope, toPath: paths.other)
        },
    ]

    /// Every name under the root (temporary files included) with its bytes and recorded owner.
    static func snapshot(_ fixture: RemoteFixture) throws -> [String: String] {
        var state: [String: String] = [:]
        let root = fixture.base.root
        for name in try FileManager.default.subpathsOfDirectory(atPath: root) {
            let path = root + "/" + name
            let content = bytes(of: path).map { Data($0).base64EncodedString() } ?? "-"
            let info = try fixture.base.files.protectionInfo(atPath: path)
            state[name] = "\(content) owner=\(info?.owner.name ?? "none") encrypted=\(info?.isEncrypted ?? false)"
        }
        return state
    }

    /// A fixture with the files in place, written while the store answered; then its cache is cold and
    /// every fetch waits until the gate opens.
    static func prepared() async throws -> (RemoteFixture, FilePaths) {
        // Isolation off: alice may hand her file to bob, so the store, not the policy, stops the transfers.
        let fixture = try RemoteFixture(bridgeTimeout: .milliseconds(150), isolated: false)
        let paths = FilePaths(
            document: fixture.base.path("document.txt"), other: fixture.base.path("other.txt"),
            envelope: fixture.base.path("stream.idps"), fresh: fixture.base.path("fresh.bin"))
        try await IdentityContext.withThreadIdentity(alice) {
            try await fixture.files.async.writeFile(atPath: paths.document, contents: Data("alice's ledger".utf8))
            try await fixture.files.async.writeFile(atPath: paths.other, contents: Data("alice's notes".utf8))
            try await fixture.files.async.protect(atPath: paths.document, toPath: paths.envelope)
        }
        fixture.remote.dropCache()
        fixture.remote.closeGate()
        return (fixture, paths)
    }

    @Test("a synchronous change whose key store does not answer in time (113) changes nothing", arguments: changes)
    func storeTimeout(_ change: Change) async throws {
        let (fixture, paths) = try await Self.prepared()
        defer { fixture.remote.openGate() }
        let before = try Self.snapshot(fixture)
        let error = await withCheckedContinuation { (continuation: CheckedContinuation<ProtectionError?, Never>) in
            DispatchQueue.global().async {
                do {
                    try IdentityContext.withThreadIdentity(alice) { try change.run(fixture.files, paths) }
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error as? ProtectionError)
                }
            }
        }
        #expect(error?.code == 113)
        #expect(try Self.snapshot(fixture) == before)
    }

    @Test("an asynchronous change cancelled while it awaits the key changes nothing", arguments: changes)
    func cancelledWhileAwaitingKey(_ change: Change) async throws {
        let (fixture, paths) = try await Self.prepared()
        defer { fixture.remote.openGate() }
        let before = try Self.snapshot(fixture)
        let fetchesBefore = fixture.remote.fetches
        let files = fixture.files
        let finished = LockedValue(false)
        let task = Task { () async -> ProtectionError? in
            defer { finished.withLock { $0 = true } }
            do {
                try await IdentityContext.withThreadIdentity(alice) {
                    try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try change.run(files, paths) }
                }
                return nil
            } catch {
                return error as? ProtectionError
            }
        }
        // Cancelled once it waits on the store (its fetch has started).
        while fixture.remote.fetches == fetchesBefore && !finished.withLock({ $0 }) { await Task.yield() }
        task.cancel()
        let error = await task.value
        #expect(error?.code == 113)
        #expect(try Self.snapshot(fixture) == before)
    }

    @Test("the asynchronous ProtectedFile open with truncation, cancelled, returns no handle and keeps the file")
    func cancelledTruncatingOpenKeepsTheFile() async throws {
        let (fixture, paths) = try await Self.prepared()
        defer { fixture.remote.openGate() }
        let fetchesBefore = fixture.remote.fetches
        let files = fixture.files
        let finished = LockedValue(false)
        let task = Task { () async throws -> ProtectedFile in
            defer { finished.withLock { $0 = true } }
            return try await IdentityContext.withThreadIdentity(alice) {
                try await files.async.openProtectedFile(atPath: paths.document, options: [.read, .write, .truncate])
            }
        }
        while fixture.remote.fetches == fetchesBefore && !finished.withLock({ $0 }) { await Task.yield() }
        task.cancel()
        await #expect(throws: ProtectionError.self) { _ = try await task.value }
        fixture.remote.openGate()
        let content = try await IdentityContext.withThreadIdentity(alice) { try await files.async.readFile(atPath: paths.document) }
        #expect(content == Data("alice's ledger".utf8))
        #expect(try files.protectionInfo(atPath: paths.document)?.owner == alice)
    }

    @Test("a writing open of a file recorded open, interrupted at the key, leaves it open after its owner leaves")
    func interruptedWritingOpenKeepsTheFileOpen() async throws {
        // dave's plain file, written while he was not managed: recorded open.
        let fixture = try RemoteFixture(bridgeTimeout: .milliseconds(150), isolated: true)
        let dave: Identity = "dave@northwind.com"
        let path = fixture.base.path("dave.txt")
        try await IdentityContext.withThreadIdentity(dave) {
            try await fixture.files.async.writeFile(atPath: path, contents: Data("dave's open notes".utf8))
        }
        // Managed now, with encryption required: the open must encrypt the file, and its key does not come.
        fixture.base.policy.addManagedIdentity(dave)
        fixture.remote.dropCache()
        fixture.remote.closeGate()
        let files = fixture.files
        let error = await withCheckedContinuation { (continuation: CheckedContinuation<ProtectionError?, Never>) in
            DispatchQueue.global().async {
                do {
                    let file = try IdentityContext.withThreadIdentity(dave) { try files.openProtectedFile(atPath: path, options: [.read, .write]) }
                    try? file.close()
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error as? ProtectionError)
                }
            }
        }
        fixture.remote.openGate()
        #expect(error?.code == 113)
        // Nothing was written under the management that ended: the file is as open as before.
        fixture.base.policy.removeManagedIdentity(dave)
        #expect(try !files.isIsolated(atPath: path))
        let read = try IdentityContext.withThreadIdentity(carol) { try files.readFile(atPath: path) }
        #expect(read == Data("dave's open notes".utf8))
    }

    @Test("a truncating open that completes empties the file and keeps its owner and permissions")
    func truncationStillTruncates() throws {
        let fixture = try Fixture()
        let path = fixture.path("log.bin")
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.writeFile(atPath: path, contents: Data("old".utf8))
            #expect(chmod(path, 0o640) == 0)
            let file = try fixture.files.openProtectedFile(atPath: path, options: [.read, .write, .truncate])
            #expect(try file.size() == 0)
            try file.write(Array("new".utf8))
            try file.close()
            #expect(try fixture.files.readFile(atPath: path) == Data("new".utf8))
        }
        #expect(try fixture.files.protectionInfo(atPath: path)?.owner == alice)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o7777 == 0o640)

        // A plain handle too: emptied, owned by the caller, no temporary file left beside it.
        let plain = try Fixture(encryptionRequired: false)
        let text = plain.path("notes.txt")
        try IdentityContext.withThreadIdentity(alice) {
            try plain.files.writeFile(atPath: text, contents: Data("old notes".utf8))
            let handle = try plain.files.openFile(atPath: text, options: [.read, .write, .truncate])
            try handle.write(contentsOf: Data("new".utf8))
            try handle.close()
        }
        #expect(bytes(of: text) == Array("new".utf8))
        #expect(try plain.files.protectionInfo(atPath: text)?.owner == alice)
        #expect(try FileManager.default.contentsOfDirectory(atPath: plain.root) == ["notes.txt"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.root) == ["log.bin"])
    }

    @Test("a new file's temporary name that a crash left beside it goes; the file and its recorded owner stay")
    func leftoverTemporaryNameOfAPlacedFile() throws {
        let fixture = try Fixture(ownerStorage: .indexOnly, encryptionRequired: false)
        let path = fixture.path("new.txt")
        let file = try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.openProtectedFile(atPath: path, options: [.read, .write, .create])
        }
        try file.write(Array("kept".utf8))
        try file.close()
        // What a crash between link(2) and the unlink of the temporary name leaves: a second name.
        let second = fixture.path(".new.txt.idp-crash.tmp")
        #expect(link(path, second) == 0)
        #expect(try fixture.files.removeInterruptedWrites(olderThan: 0) == [second])
        #expect(bytes(of: path) == Array("kept".utf8))
        #expect(try fixture.files.protectionInfo(atPath: path)?.owner == alice)
    }
}
