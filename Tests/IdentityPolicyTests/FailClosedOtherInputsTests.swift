import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// A key store over a FileKeyStore that can be told to time out (113) for chosen accounts. A class, so the
/// runtime sees it as a store of its own (as a caching remote store in front of a database is).
private final class WrappingKeyStore: KeyStore {
    let inner: FileKeyStore
    let timingOut = LockedValue<Set<Identity>>([])

    init(_ inner: FileKeyStore) { self.inner = inner }

    private func check(_ identity: Identity) throws(ProtectionError) {
        if timingOut.withLock({ $0.contains(identity) }) { throw .keyStoreUnavailable(reason: "timed out (test)") }
    }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try check(identity)
        return try inner.currentKey(for: identity)
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try check(identity)
        return try inner.key(withID: id, for: identity)
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try check(identity)
        return try inner.rotateKey(for: identity)
    }

    func destroyKeys(for identity: Identity) throws(ProtectionError) {
        try inner.destroyKeys(for: identity)
    }
}

/// A policy directory, a manager over it, and file and data managers using a wrapping key store.
private struct FailClosedFixture {
    let policies: TemporaryDirectory
    let directory: TemporaryDirectory
    let source: DirectoryPolicySource
    let manager: PolicyManager
    let keys: FileKeyStore
    let store: WrappingKeyStore
    let data: DataProtectionManager
    let files: FileProtectionManager

    init(_ documents: [String: String], encryption: Bool = true) throws {
        policies = try TemporaryDirectory()
        for (name, text) in documents { try policies.write(name, text) }
        source = try DirectoryPolicySource(directory: policies.path)
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        manager = PolicyManager(settings: RuntimeSettings(), policySource: source)
        keys = try FileKeyStore(atPath: directory.file("keys"))
        store = WrappingKeyStore(keys)
        data = DataProtectionManager(keyStore: store, policy: manager)
        files = try FileProtectionManager(roots: [directory.file("root")], keyStore: store, policy: manager, stateDirectory: directory.file("state"))
    }

    func path(_ name: String) -> String { directory.file("root/" + name) }

    func write(_ name: String, _ text: String) throws {
        try policies.write(name, text)
        source.reload()
    }

    func remove(_ name: String) throws {
        try FileManager.default.removeItem(atPath: policies.file(name))
        source.reload()
    }

    func code(_ body: () throws -> Void) -> Int? {
        do { try body(); return nil } catch let error as ProtectionError { return error.code } catch { return -1 }
    }

    func protectCode(_ owner: Identity) -> Int? {
        code { _ = try data.protect(Data("x".utf8), owner: owner) }
    }
}

private let tenantDoc = #"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": false}"#
private let encryptedTenantDoc = #"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": true}"#

@Suite("Failing half-way, other inputs: broken documents, withdrawals, interrupted changes, wipes under handles")
struct FailClosedOtherInputsTests {
    // MARK: 1. Broken documents

    /// Broken documents naming alice or contoso in ways the authors' table did not try.
    static let brokenNamingAlice: [(String, String)] = [
        ("BOM then wrong type", "\u{FEFF}" + #"{"formatVersion": 1, "account": "alice@contoso.com", "pinRequired": 1}"#),
        ("account twice, alice second", #"{"formatVersion": 1, "account": "dave@gmail.com", "account": "alice@contoso.com"}"#),
        ("account twice, alice first", #"{"formatVersion": 1, "account": "alice@contoso.com", "account": "dave@gmail.com"}"#),
        ("huge version", #"{"formatVersion": 1e999, "account": "alice@contoso.com"}"#),
        ("negative zero version", #"{"formatVersion": -0, "tenant": "contoso.com"}"#),
        ("nested wrong type", #"{"formatVersion": 1, "account": "alice@contoso.com", "appConfiguration": [{"a": 1}]}"#),
        ("upper-case account", #"{"formatVersion": 1, "account": "ALICE@CONTOSO.COM", "pinRequired": "yes"}"#),
        ("upper-case tenant", #"{"formatVersion": 1, "tenant": "CONTOSO.COM", "pinRequired": "yes"}"#),
        ("escaped account", #"{"formatVersion": 1, "account": "alice\u0040contoso.com", "pinRequired": "yes"}"#),
        ("account and tenant", #"{"formatVersion": 1, "account": "dave@gmail.com", "tenant": "contoso.com"}"#),
        ("account after an unknown key", #"{"formatVersion": 1, "bogus": {"deep": [1, 2, {"x": null}]}, "account": "alice@contoso.com"}"#),
        ("trailing garbage after object", #"{"formatVersion": 1, "account": "alice@contoso.com"} x"#),
        ("two objects", #"{"formatVersion": 1, "account": "alice@contoso.com"}{"formatVersion": 1, "account": "dave@gmail.com"}"#),
        ("null version", #"{"formatVersion": null, "tenant": "contoso.com"}"#),
    ]

    @Test("a broken document naming alice or contoso in other ways refuses alice (115)", arguments: brokenNamingAlice)
    func brokenNamingAliceRefuses(kind: String, text: String) throws {
        let x = try FailClosedFixture(["broken.json": text])
        #expect(x.protectCode(alice) == 115, "\(kind)")
        #expect(!x.manager.policyErrors.isEmpty, "\(kind)")
    }

    /// Documents whose subject cannot be read: everyone without a document of their own refuses.
    static let brokenUnknown: [(String, String)] = [
        ("white space only", " \n\t "),
        ("BOM only", "\u{FEFF}"),
        ("null", "null"),
        ("account null", #"{"formatVersion": 1, "account": null}"#),
        ("account in a nested object only", #"{"formatVersion": 1, "appConfiguration": {"account": "dave@gmail.com"}}"#),
        ("account with surrounding space", #"{"formatVersion": 1, "account": " alice@contoso.com"}"#),
        ("account with a zero-width joiner", #"{"formatVersion": 1, "account": "alice\u200d@contoso.com"}"#),
        ("truncated inside the account", #"{"formatVersion": 1, "account": "alice@con"#),
    ]

    @Test("a document whose subject cannot be read refuses dave (115), who has no document", arguments: brokenUnknown)
    func brokenUnknownRefusesEveryone(kind: String, text: String) throws {
        let x = try FailClosedFixture(["broken.json": text])
        #expect(x.protectCode(dave) == 115, "\(kind)")
        #expect(x.protectCode(alice) == 115, "\(kind)")
    }

    @Test("raw invalid UTF-8 bytes in a document refuse everyone without a document")
    func invalidUTF8Bytes() throws {
        let x = try FailClosedFixture([:])
        var bytes = Array(#"{"formatVersion": 1, "account": "ali"#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#"e@contoso.com"}"#.utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: x.policies.file("bad.json")))
        x.source.reload()
        #expect(x.protectCode(dave) == 115)
    }

    @Test("a symlinked document that is broken refuses the account it names; a dangling one refuses everyone")
    func symlinkedDocuments() throws {
        let x = try FailClosedFixture([:])
        let elsewhere = try TemporaryDirectory()
        try elsewhere.write("real.txt", #"{"formatVersion": 1, "account": "alice@contoso.com", "pinRequired": "yes"}"#)
        try FileManager.default.createSymbolicLink(atPath: x.policies.file("alice.json"), withDestinationPath: elsewhere.file("real.txt"))
        x.source.reload()
        #expect(x.protectCode(alice) == 115)
        #expect(x.protectCode(dave) == nil)
        try FileManager.default.removeItem(atPath: elsewhere.file("real.txt"))
        x.source.reload()
        #expect(x.protectCode(dave) == 115)
        #expect(x.protectCode(alice) == 115)
    }

    @Test("a broken document naming the tenant by its registered ID refuses the account registered with it")
    func brokenDocumentNamingTenantID() throws {
        let x = try FailClosedFixture([
            "domain.json": tenantDoc,
            "id.json": #"{"formatVersion": 1, "tenant": "72f988bf-86f1-41af-91ab-2d7cd011db47", "pinRequired": "yes"}"#,
        ])
        #expect(x.protectCode(alice) == nil)
        x.manager.registerAccount(alice, tenantID: "72F988BF-86F1-41AF-91AB-2D7CD011DB47")
        #expect(x.protectCode(alice) == 115)
        #expect(x.protectCode(bob) == nil)
    }

    // MARK: 2. Recorded isolation under other withdrawals

    /// Readers other than alice; none may read what alice wrote while managed.
    static let strangers: [Identity?] = [nil, .unmanaged, carol, dave, bob]

    @Test("alice's data stays hers after her registered tenant ID changes to one with no document",
          arguments: [true, false])
    func tenantIDRegistrationChanged(encryption: Bool) throws {
        let x = try FailClosedFixture(["id.json": #"{"formatVersion": 1, "tenant": "tid-1", "fileEncryptionRequired": \#(encryption)}"#])
        x.manager.registerAccount(alice, tenantID: "tid-1")
        #expect(x.manager.isIdentityManaged(alice))
        let path = x.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try x.files.writeFile(atPath: path, contents: Data("alice's secret".utf8)) }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        x.manager.registerAccount(alice, tenantID: "tid-2")
        #expect(!x.manager.isIdentityManaged(alice))
        for reader in Self.strangers {
            let code = IdentityContext.withThreadIdentity(reader) { x.code { _ = try x.files.readFile(atPath: path) } }
            #expect(code == 108, "\(String(describing: reader)) read alice's isolated data (encryption \(encryption))")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        let own = try IdentityContext.withThreadIdentity(alice) { try x.files.readFile(atPath: path) }
        #expect(own == Data("alice's secret".utf8))
    }

    @Test("after alice's tenant document is removed, strangers cannot modify, re-own, encrypt, decrypt or truncate her data",
          arguments: [true, false])
    func strangersCannotModifyAfterWithdrawal(encryption: Bool) throws {
        let x = try FailClosedFixture(["contoso.json": encryption ? encryptedTenantDoc : tenantDoc])
        let path = x.path("alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try x.files.writeFile(atPath: path, contents: Data("alice's secret".utf8)) }
        try x.remove("contoso.json")
        #expect(!x.manager.isIdentityManaged(alice))
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let copy = x.path("copy.txt")
        for reader in Self.strangers {
            let attempts: [(String, () throws -> Void)] = [
                ("writeFile", { try x.files.writeFile(atPath: path, contents: Data("mine".utf8)) }),
                ("protect owner carol", { try x.files.protect(atPath: path, owner: carol) }),
                ("protect owner nil", { try x.files.protect(atPath: path) }),
                ("protect owner unmanaged", { try x.files.protect(atPath: path, owner: .unmanaged) }),
                ("encryptFile owner dave", { try x.files.encryptFile(atPath: path, owner: dave) }),
                ("decryptFile", { try x.files.decryptFile(atPath: path) }),
                ("decryptFile to copy", { try x.files.decryptFile(atPath: path, toPath: copy) }),
                ("unprotect to copy", { try x.files.unprotect(atPath: path, toPath: copy) }),
                ("protect to copy", { try x.files.protect(atPath: path, toPath: copy, owner: carol) }),
                ("open truncate", { _ = try x.files.openProtectedFile(atPath: path, options: [.read, .write, .truncate]) }),
                ("open create truncate owner carol", {
                    _ = try x.files.openProtectedFile(atPath: path, options: [.write, .create, .truncate], owner: carol)
                }),
                ("open read", { _ = try x.files.openProtectedFile(atPath: path, options: [.read]).readToEnd() }),
            ]
            for (name, attempt) in attempts {
                let code = IdentityContext.withThreadIdentity(reader) { x.code(attempt) }
                #expect(code != nil, "\(String(describing: reader)): \(name) succeeded on alice's isolated data (encryption \(encryption))")
                #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(String(describing: reader)): \(name) changed alice's bytes")
                if FileManager.default.fileExists(atPath: copy) {
                    let leaked = (try? Data(contentsOf: URL(fileURLWithPath: copy))).map { String(decoding: $0, as: UTF8.self) } ?? ""
                    #expect(!leaked.contains("alice's secret"), "\(String(describing: reader)): \(name) copied alice's plaintext")
                    try? FileManager.default.removeItem(atPath: copy)
                }
            }
        }
    }

    @Test("StaticManagedIdentityPolicy: data of an account removed from the managed set stays isolated, plain or encrypted",
          arguments: [true, false])
    func staticPolicyRemoval(encryption: Bool) throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        let policy = StaticManagedIdentityPolicy(managed: [alice, bob], fileEncryptionRequired: encryption)
        let files = try FileProtectionManager(roots: [directory.file("root")], keyStore: keys, policy: policy, stateDirectory: directory.file("state"))
        let path = directory.file("root/alice.txt")
        // Written through a handle opened via a URL, not writeFile.
        try IdentityContext.withThreadIdentity(alice) {
            let handle = try files.openProtectedFile(at: URL(fileURLWithPath: path), options: [.write, .create])
            try handle.write(Array("alice's secret".utf8), at: 0)
            try handle.close()
        }
        policy.removeManagedIdentity(alice)
        for reader in [nil, .unmanaged, carol, bob] as [Identity?] {
            let code = IdentityContext.withThreadIdentity(reader) {
                do { _ = try files.readFile(atPath: path); return nil as Int? } catch let error as ProtectionError { return error.code } catch { return -1 }
            }
            #expect(code == 108, "\(String(describing: reader)) (encryption \(encryption))")
        }
    }

    enum OwnerAfterWithdrawal: String, CaseIterable, Sendable {
        case appendThroughHandle, writeAtZeroShorter, decryptInPlace, decryptToCopy, unprotectStreamToCopy, protectInPlaceSameOwner, asyncDecryptToCopyURL
    }

    @Test("alice, no longer managed, works on data she wrote while managed: what still holds her old data stays isolated",
          arguments: OwnerAfterWithdrawal.allCases)
    func ownerWorksAfterWithdrawal(_ action: OwnerAfterWithdrawal) async throws {
        let x = try FailClosedFixture(["contoso.json": encryptedTenantDoc])
        let path = x.path("alice.bin")
        let stream = x.path("alice.stream")
        let plain = x.path("plain.txt")
        let copy = x.path("copy.txt")
        let secret = "alice's secret, written while managed"
        try Data(secret.utf8).write(to: URL(fileURLWithPath: plain))
        try IdentityContext.withThreadIdentity(alice) {
            try x.files.writeFile(atPath: path, contents: Data(secret.utf8))
            try x.files.protect(atPath: plain, toPath: stream, owner: alice)
        }
        try FileManager.default.removeItem(atPath: plain)
        try x.remove("contoso.json")
        #expect(!x.manager.isIdentityManaged(alice))
        let files = x.files
        var target = path
        try await IdentityContext.withThreadIdentity(alice) {
            switch action {
            case .appendThroughHandle:
                let handle = try files.openProtectedFile(atPath: path, options: [.read, .write])
                try handle.write(Array(" and more".utf8), at: UInt64(secret.utf8.count))
                try handle.close()
            case .writeAtZeroShorter:
                let handle = try files.openProtectedFile(atPath: path, options: [.read, .write])
                try handle.write(Array("ALICE".utf8), at: 0)
                try handle.close()
            case .decryptInPlace:
                try files.decryptFile(atPath: path)
            case .decryptToCopy:
                try files.decryptFile(atPath: path, toPath: copy)
                target = copy
            case .unprotectStreamToCopy:
                try files.unprotect(atPath: stream, toPath: copy)
                target = copy
            case .protectInPlaceSameOwner:
                try files.protect(atPath: path, owner: alice)
            case .asyncDecryptToCopyURL:
                try await files.async.decryptFile(at: URL(fileURLWithPath: path), to: URL(fileURLWithPath: copy))
                target = copy
            }
        }
        for reader in Self.strangers {
            let code = IdentityContext.withThreadIdentity(reader) { x.code { _ = try x.files.readFile(atPath: target) } }
            #expect(code == 108, "\(action): \(String(describing: reader)) read data alice wrote while managed")
        }
        #expect(try x.files.isIsolated(atPath: target), "\(action): \(target) not isolated")
    }

    @Test("a handle opened while alice was unmanaged, written through once she is managed: the write is neither isolated nor encrypted",
          arguments: [false, true])
    func handleSpanningManagement(encryption: Bool) throws {
        let x = try FailClosedFixture([:])
        let path = x.path("alice.txt")
        let handle = try IdentityContext.withThreadIdentity(alice) {
            try x.files.openProtectedFile(atPath: path, options: [.read, .write, .create])
        }
        try handle.write(Array("public part. ".utf8), at: 0)
        try x.write("contoso.json", encryption ? encryptedTenantDoc : tenantDoc)
        #expect(x.manager.isIdentityManaged(alice))
        // alice writes managed data through the handle she opened before.
        let code = x.code { try handle.write(Array("alice's managed secret".utf8), at: 13) }
        try? handle.close()
        let written = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self).contains("managed secret")
        guard code == nil, written else { return }   // refusing the write would hold
        if encryption {
            #expect(!written, "alice's managed data was written in the clear although her policy requires encryption")
        }
        #expect(try x.files.isIsolated(atPath: path), "managed data written through the handle is not recorded as isolated")
        try x.remove("contoso.json")
        for reader in Self.strangers {
            let read = IdentityContext.withThreadIdentity(reader) { x.code { _ = try x.files.readFile(atPath: path) } }
            #expect(read == 108, "\(String(describing: reader)) read what alice wrote while managed")
        }
    }

    // MARK: 3. Interrupted changes

    @Test("protect(atPath:toPath:) over an existing destination with a key-store timeout leaves the destination as it was")
    func protectToExistingDestinationTimesOut() throws {
        let x = try FailClosedFixture(["contoso.json": encryptedTenantDoc])
        let source = x.path("plain.txt")
        let destination = x.path("dest.bin")
        try Data("source".utf8).write(to: URL(fileURLWithPath: source))
        try IdentityContext.withThreadIdentity(alice) { try x.files.writeFile(atPath: destination, contents: Data("alice's old".utf8)) }
        let before = try Data(contentsOf: URL(fileURLWithPath: destination))
        x.store.timingOut.withLock { $0 = [alice] }
        let code = IdentityContext.withThreadIdentity(alice) { x.code { try x.files.protect(atPath: source, toPath: destination, owner: alice) } }
        #expect(code == 113)
        #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == before)
        x.store.timingOut.withLock { $0 = [] }
        let read = try IdentityContext.withThreadIdentity(alice) { try x.files.readFile(atPath: destination) }
        #expect(read == Data("alice's old".utf8))
    }

    @Test("decrypt to a copy over an existing file with a key timeout leaves the copy as it was")
    func decryptToExistingCopyTimesOut() throws {
        let x = try FailClosedFixture(["contoso.json": encryptedTenantDoc])
        let source = x.path("enc.bin")
        let copy = x.path("copy.txt")
        try IdentityContext.withThreadIdentity(alice) {
            try x.files.writeFile(atPath: source, contents: Data("alice's new".utf8))
            try x.files.writeFile(atPath: copy, contents: Data("alice's copy".utf8))
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: copy))
        x.store.timingOut.withLock { $0 = [alice] }
        // A stream envelope of alice's, for unprotect(atPath:toPath:).
        let plain = x.path("plain.txt")
        let stream = x.path("stream.bin")
        try Data("alice's streamed".utf8).write(to: URL(fileURLWithPath: plain))
        x.store.timingOut.withLock { $0 = [] }
        try IdentityContext.withThreadIdentity(alice) { try x.files.protect(atPath: plain, toPath: stream, owner: alice) }
        x.store.timingOut.withLock { $0 = [alice] }
        for (name, call) in [
            ("decryptFile toPath", { try x.files.decryptFile(atPath: source, toPath: copy) }),
            ("unprotect toPath", { try x.files.unprotect(atPath: stream, toPath: copy) }),
        ] as [(String, () throws -> Void)] {
            let code = IdentityContext.withThreadIdentity(alice) { x.code(call) }
            #expect(code == 113, "\(name)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: copy)) == before, "\(name) changed the copy")
        }
    }

    @Test("a key timeout on re-owning a file to bob leaves alice's file and owner as they were")
    func reOwnTimesOut() throws {
        let x = try FailClosedFixture(["contoso.json": encryptedTenantDoc])
        let path = x.path("a.bin")
        try IdentityContext.withThreadIdentity(alice) { try x.files.writeFile(atPath: path, contents: Data("alice's".utf8)) }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        x.store.timingOut.withLock { $0 = [bob] }
        let code = IdentityContext.withThreadIdentity(alice) { x.code { try x.files.protect(atPath: path, owner: bob) } }
        #expect(code == 113)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try x.files.protectionInfo(atPath: path)?.owner == alice)
    }

    @Test("cancelling an async protect(atPath:toPath:) over an existing destination leaves it whole",
          arguments: [0, 1, 3, 10, 30])
    func cancelledAsyncProtect(delay: Int) async throws {
        let x = try FailClosedFixture(["contoso.json": encryptedTenantDoc])
        let source = x.path("big.txt")
        let destination = x.path("dest.bin")
        try Data(repeating: 0x41, count: 32 << 20).write(to: URL(fileURLWithPath: source))
        try IdentityContext.withThreadIdentity(alice) { try x.files.writeFile(atPath: destination, contents: Data("alice's old".utf8)) }
        let before = try Data(contentsOf: URL(fileURLWithPath: destination))
        let files = x.files
        let task = Task {
            try await IdentityContext.withThreadIdentity(alice) {
                try await files.async.protect(atPath: source, toPath: destination, owner: alice, chunkSize: 4096)
            }
        }
        try await Task.sleep(for: .milliseconds(delay))
        task.cancel()
        let result = await task.result
        let after = try Data(contentsOf: URL(fileURLWithPath: destination))
        switch result {
        case .success:
            print("attack: protect after \(delay) ms finished")
            let copy = x.path("copy.txt")
            try IdentityContext.withThreadIdentity(alice) { try x.files.unprotect(atPath: destination, toPath: copy) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: copy)).count == 32 << 20)
        case let .failure(error):
            print("attack: protect after \(delay) ms failed with \(error)")
            #expect(after == before, "a cancelled protect changed the destination")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: x.directory.file("root")).filter { !["big.txt", "dest.bin", "copy.txt"].contains($0) }
        #expect(left.isEmpty, "left \(left)")
    }

    enum TimedOutChange: String, CaseIterable, Sendable {
        case writeFileOver, openTruncate, openCreateTruncateOwnerBob, encryptPlain, decryptInPlace, reOwnToAlice, protectInPlace
    }

    @Test("every change under a key-store timeout leaves bytes and owner as they were (113)", arguments: TimedOutChange.allCases)
    func timedOutChanges(_ change: TimedOutChange) throws {
        let x = try FailClosedFixture(["contoso.json": encryptedTenantDoc, "dave.json": #"{"formatVersion": 1, "account": "dave@gmail.com", "fileEncryptionRequired": false}"#])
        let encrypted = x.path("enc.bin")
        let plain = x.path("plain.txt")
        let bobs = x.path("bob.bin")
        try IdentityContext.withThreadIdentity(alice) { try x.files.writeFile(atPath: encrypted, contents: Data("alice's secret".utf8)) }
        try IdentityContext.withThreadIdentity(dave) { try x.files.writeFile(atPath: plain, contents: Data("dave's plain".utf8)) }
        try IdentityContext.withThreadIdentity(bob) { try x.files.writeFile(atPath: bobs, contents: Data("bob's".utf8)) }
        let paths = [encrypted, plain, bobs]
        let before = try paths.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        let owners = try paths.map { try x.files.protectionInfo(atPath: $0)?.owner }
        x.store.timingOut.withLock { $0 = [alice, bob, dave] }
        let code: Int? = IdentityContext.withThreadIdentity(alice) {
            x.code {
                switch change {
                case .writeFileOver: try x.files.writeFile(atPath: encrypted, contents: Data("new".utf8))
                case .openTruncate: _ = try x.files.openProtectedFile(atPath: encrypted, options: [.read, .write, .truncate])
                case .openCreateTruncateOwnerBob:
                    _ = try x.files.openProtectedFile(atPath: encrypted, options: [.write, .create, .truncate], owner: bob)
                case .encryptPlain: try IdentityContext.withThreadIdentity(dave) { try x.files.encryptFile(atPath: plain, owner: alice) }
                case .decryptInPlace: try x.files.decryptFile(atPath: encrypted)
                case .reOwnToAlice: try IdentityContext.withThreadIdentity(bob) { try x.files.protect(atPath: bobs, owner: alice) }
                case .protectInPlace: try x.files.protect(atPath: encrypted, owner: bob)
                }
            }
        }
        #expect(code != nil, "\(change) succeeded with every key timing out")
        for (index, path) in paths.enumerated() {
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before[index], "\(change) changed \(path)")
            #expect(try x.files.protectionInfo(atPath: path)?.owner == owners[index], "\(change) changed the owner of \(path)")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: x.directory.file("root")).sorted()
        #expect(left == ["bob.bin", "enc.bin", "plain.txt"], "\(change) left \(left)")
    }

    @Test("an index-only owner record follows the file when the app renames it: still isolated after withdrawal")
    func indexOnlyRename() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        let policy = StaticManagedIdentityPolicy(managed: [alice, bob], fileEncryptionRequired: false)
        let files = try FileProtectionManager(
            roots: [directory.file("root")], keyStore: keys, policy: policy, stateDirectory: directory.file("state"), ownerStorage: .indexOnly)
        let path = directory.file("root/alice.txt")
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: path, contents: Data("alice's secret".utf8)) }
        let moved = directory.file("root/renamed.txt")
        try FileManager.default.moveItem(atPath: path, toPath: moved)
        for reader in [nil, .unmanaged, carol, bob] as [Identity?] {
            let code = IdentityContext.withThreadIdentity(reader) {
                do { _ = try files.readFile(atPath: moved); return nil as Int? } catch let error as ProtectionError { return error.code } catch { return -1 }
            }
            #expect(code == 108, "while managed: \(String(describing: reader)) read alice's renamed file")
        }
        policy.removeManagedIdentity(alice)
        for reader in [nil, .unmanaged, carol, bob] as [Identity?] {
            let code = IdentityContext.withThreadIdentity(reader) {
                do { _ = try files.readFile(atPath: moved); return nil as Int? } catch let error as ProtectionError { return error.code } catch { return -1 }
            }
            #expect(code == 108, "after withdrawal: \(String(describing: reader)) read alice's renamed file")
        }
    }

    @Test("a wipe through the async removeFiles under a case variant of alice's name stops her handle")
    func asyncWipeWithoutIdentity() async throws {
        let x = try FailClosedFixture(["contoso.json": encryptedTenantDoc])
        let files = x.files
        let handle = try await IdentityContext.withThreadIdentity(alice) {
            try await files.async.openProtectedFile(atPath: x.path("a.bin"), options: [.read, .write, .create])
        }
        try handle.write(Array("alice's".utf8), at: 0)
        let removed = try await IdentityContext.withThreadIdentity("Alice@Contoso.COM") {
            try await files.async.removeFiles(ownedBy: "ALICE@contoso.com")
        }
        #expect(removed.count == 1)
        #expect(x.code { _ = try handle.readToEnd() } == 103)
    }

    @Test("wipeData(forTenant:) by registered tenant ID or by a case variant of the domain reaches every account's files, or says it did not",
          arguments: ["tid-1", "TID-1", "CONTOSO.COM"])
    func tenantWipeByIDOrCase(tenant: String) async throws {
        let x = try FailClosedFixture([
            "id.json": #"{"formatVersion": 1, "tenant": "tid-1", "fileEncryptionRequired": false}"#, "contoso.json": tenantDoc,
        ])
        x.manager.fileProtection = x.files
        x.manager.registerAccount(alice, tenantID: "tid-1")
        x.manager.registerAccount(bob, tenantID: "tid-1")
        let paths = [x.path("alice.txt"), x.path("bob.txt"), x.path("mallory.txt")]
        try IdentityContext.withThreadIdentity(alice) { try x.files.writeFile(atPath: paths[0], contents: Data("a".utf8)) }
        try IdentityContext.withThreadIdentity(bob) { try x.files.writeFile(atPath: paths[1], contents: Data("b".utf8)) }
        // mallory@contoso.com: not registered, so of tenant contoso.com by domain.
        try IdentityContext.withThreadIdentity("mallory@contoso.com") { try x.files.writeFile(atPath: paths[2], contents: Data("m".utf8)) }
        let report = await x.manager.wipeData(forTenant: TenantID(tenant))
        let expectedGone = tenant == "CONTOSO.COM" ? [paths[2]] : [paths[0], paths[1]]
        let remaining = expectedGone.filter { FileManager.default.fileExists(atPath: $0) }
        #expect(remaining.isEmpty || !report.isComplete, "wipe of \(tenant) reported complete with \(remaining) left")
        #expect(remaining.isEmpty, "wipe of \(tenant) left \(remaining)")
    }

    // MARK: 4. Wipes

    @Test("handles opened via the URL and async APIs stop after wipeData(forAccount:); reopening the path starts afresh",
          arguments: [true, false])
    func wipeUnderURLAndAsyncHandles(encryption: Bool) async throws {
        let x = try FailClosedFixture(["contoso.json": encryption ? encryptedTenantDoc : tenantDoc])
        x.manager.fileProtection = x.files
        let files = x.files
        let path = x.path("a.bin")
        let byURL = try IdentityContext.withThreadIdentity(alice) {
            let handle = try files.openProtectedFile(at: URL(fileURLWithPath: path), options: [.read, .write, .create])
            try handle.write(Array("alice's secret".utf8), at: 0)
            return handle
        }
        let byAsync = try await IdentityContext.withThreadIdentity(alice) {
            try await files.async.openProtectedFile(atPath: path, options: [.read, .write])
        }
        let bobs = try await IdentityContext.withThreadIdentity(bob) {
            try await files.async.openProtectedFile(atPath: x.path("b.bin"), options: [.read, .write, .create])
        }
        _ = await x.manager.wipeData(forAccount: alice)
        for (name, handle) in [("url", byURL), ("async", byAsync)] {
            #expect(x.code { _ = try handle.read(at: 0, upToCount: 100) } == 103, "\(name)")
            #expect(x.code { try handle.write(Array("x".utf8), at: 0) } == 103, "\(name)")
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        try bobs.write(Array("bob".utf8), at: 0)
        // Reopening the path (once the account is unblocked) creates a new, empty file; the old handles stay dead.
        x.manager.unblockAccount(alice)
        let fresh = try IdentityContext.withThreadIdentity(alice) {
            try files.openProtectedFile(atPath: path, options: [.read, .write, .create])
        }
        #expect(try fresh.readToEnd() == [])
        try fresh.write(Array("new".utf8), at: 0)
        #expect(x.code { _ = try byURL.read(at: 0, upToCount: 100) } == 103)
        #expect(x.code { _ = try byAsync.readToEnd() } == 103)
    }
}
