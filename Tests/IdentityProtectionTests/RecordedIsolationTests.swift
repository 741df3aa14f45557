import Foundation
@testable import IdentityProtection
import IdentityRuntime
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A policy written the shortest way: `isManaged` and `isFileEncryptionRequired` only, the protocol's default
/// access rule, and a set that can change.
private final class WithdrawablePolicy: ManagedIdentityPolicy {
    let managed: Mutex<Set<Identity>>
    let encrypt: Bool

    init(_ managed: Set<Identity>, encrypt: Bool) {
        self.managed = Mutex(managed)
        self.encrypt = encrypt
    }

    func isManaged(_ identity: Identity) -> Bool { managed.withLock { $0.contains(identity) } }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { encrypt }
}

/// A policy that refuses nothing at all, as a service that decides access elsewhere might write it: recorded
/// isolation still holds once the owner is no longer managed.
private final class NothingRefusedPolicy: ManagedIdentityPolicy {
    let managed: Mutex<Set<Identity>>
    let encrypt: Bool

    init(_ managed: Set<Identity>, encrypt: Bool) {
        self.managed = Mutex(managed)
        self.encrypt = encrypt
    }

    func isManaged(_ identity: Identity) -> Bool { managed.withLock { $0.contains(identity) } }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { encrypt }
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? { nil }
}

/// How a test stops managing alice.
private enum PolicyKind: String, CaseIterable, CustomTestStringConvertible {
    case staticPolicy, protocolDefault, nothingRefused
    var testDescription: String { rawValue }
}

private let secret = "alice's quarterly numbers"
private let bystanders: [Identity?] = [carol, "dave@northwind.com", .unmanaged, nil]

/// alice's data of every kind, written while she is managed, and the managers that wrote it.
private final class WrittenWhileManaged: Sendable {
    let directory: String
    let root: String
    let files: FileProtectionManager
    let data: DataProtectionManager
    let withdraw: @Sendable () -> Void
    let envelope: Data
    let stream: [UInt8]
    let file: String
    let streamFile: String
    let handleFile: String

    init(_ kind: PolicyKind, encrypt: Bool, ownerStorage: OwnerStorage = .automatic) async throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("idp-recorded-XXXXXX").path
        var buffer = Array(template.utf8CString)
        guard mkdtemp(&buffer) != nil else { throw ProtectionError.ioFailure(path: template, operation: "mkdtemp", errno: errno) }
        directory = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        root = directory + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let keys = try FileKeyStore(atPath: directory + "/keys")
        let policy: any ManagedIdentityPolicy
        switch kind {
        case .staticPolicy:
            let staticPolicy = StaticManagedIdentityPolicy(managed: [alice, carol], fileEncryptionRequired: encrypt)
            policy = staticPolicy
            withdraw = { staticPolicy.removeManagedIdentity(alice) }
        case .protocolDefault:
            let minimal = WithdrawablePolicy([alice, carol], encrypt: encrypt)
            policy = minimal
            withdraw = { minimal.managed.withLock { _ = $0.remove(alice) } }
        case .nothingRefused:
            let open = NothingRefusedPolicy([alice, carol], encrypt: encrypt)
            policy = open
            withdraw = { open.managed.withLock { _ = $0.remove(alice) } }
        }
        data = DataProtectionManager(keyStore: keys, policy: policy)
        files = try FileProtectionManager(
            roots: [root], keyStore: keys, policy: policy, stateDirectory: directory + "/state", ownerStorage: ownerStorage)
        file = root + "/numbers.txt"
        streamFile = root + "/numbers.idps"
        handleFile = root + "/handle.bin"
        let (data, files, file, streamFile, handleFile) = (data, files, file, streamFile, handleFile)
        envelope = try IdentityContext.withThreadIdentity(alice) { try data.protect(Data(secret.utf8)) }
        try IdentityContext.withThreadIdentity(alice) {
            try files.writeFile(atPath: file, contents: Data(secret.utf8))
            try files.protect(atPath: file, toPath: streamFile, owner: alice)
            let handle = try files.openProtectedFile(atPath: handleFile, options: [.read, .write, .create])
            try handle.write(Array(secret.utf8))
            try handle.close()
        }
        stream = try await data.protect([Array(secret.utf8)].async, owner: alice).collect()
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Every way to get plaintext of alice's data, as `reader`: what each returned, or its error.
    func readings(as reader: Identity?) async -> [String: Result<String, ProtectionError>] {
        func attempt(_ body: () async throws -> Data) async -> Result<String, ProtectionError> {
            do { return .success(String(decoding: try await body(), as: UTF8.self)) } catch let error as ProtectionError {
                return .failure(error)
            } catch {
                return .failure(.cryptoBackendFailure("not a ProtectionError: \(error)"))
            }
        }
        let copy = root + "/copy.txt"
        defer { try? FileManager.default.removeItem(atPath: copy) }
        let (data, files, envelope, stream, file, streamFile, handleFile) = (self.data, self.files, self.envelope, self.stream, self.file, self.streamFile, self.handleFile)
        let syncReadings: [String: Result<String, ProtectionError>] = IdentityContext.withThreadIdentity(reader) {
            func attempt(_ body: () throws -> Data) -> Result<String, ProtectionError> {
                do { return .success(String(decoding: try body(), as: UTF8.self)) } catch let error as ProtectionError {
                    return .failure(error)
                } catch {
                    return .failure(.cryptoBackendFailure("not a ProtectionError: \(error)"))
                }
            }
            return [
                "unprotect(envelope)": attempt { try data.unprotect(envelope) },
                "readFile": attempt { try files.readFile(atPath: file) },
                "decryptFile(toPath:)": attempt {
                    try files.decryptFile(atPath: file, toPath: copy)
                    return FileManager.default.contents(atPath: copy) ?? Data()
                },
                "unprotect(atPath:toPath:)": attempt {
                    try files.unprotect(atPath: streamFile, toPath: copy)
                    return FileManager.default.contents(atPath: copy) ?? Data()
                },
                "ProtectedFile": attempt {
                    let handle = try files.openProtectedFile(atPath: handleFile, options: [.read])
                    defer { try? handle.close() }
                    return Data(try handle.readToEnd())
                },
                "writeFile over it": attempt {
                    try files.writeFile(atPath: file, contents: Data("overwritten".utf8))
                    return Data()
                },
                "protect(atPath:owner:) to self": attempt {
                    try files.protect(atPath: handleFile, owner: reader ?? .unmanaged)
                    return Data()
                },
            ]
        }
        let streamed = await IdentityContext.withThreadIdentity(reader) {
            await attempt { Data(try await data.unprotect([stream].async).collect()) }
        }
        return syncReadings.merging(["unprotect(stream)": streamed]) { first, _ in first }
    }

    /// Checks that every access of `reader` is refused with 108 and that alice's data is unchanged.
    func expectRefused(to reader: Identity?, sourceLocation: SourceLocation = #_sourceLocation) async {
        for (name, result) in await readings(as: reader) {
            switch result {
            case .success(let text):
                Issue.record("\(name) as \(String(describing: reader)) returned \(text.debugDescription)", sourceLocation: sourceLocation)
            case .failure(let error):
                #expect(error.code == 108, "\(name) as \(String(describing: reader)): \(error)", sourceLocation: sourceLocation)
            }
        }
        let stored = IdentityContext.withThreadIdentity(alice) { try? files.readFile(atPath: file) }
        #expect(stored.map { String(decoding: $0, as: UTF8.self) } == secret, sourceLocation: sourceLocation)
    }

    /// Checks that alice herself still reads every kind of her data.
    func expectOwnerReads(sourceLocation: SourceLocation = #_sourceLocation) async {
        for (name, result) in await readings(as: alice) where !name.hasPrefix("writeFile") && !name.hasPrefix("protect(") {
            #expect((try? result.get()) == secret, "\(name) as alice: \(result)", sourceLocation: sourceLocation)
        }
    }
}

@Suite("Isolation is recorded with the data: withdrawing a policy hands nothing to anyone")
struct RecordedIsolationTests {
    @Test("data written while alice was managed stays hers after she stops being managed, for every policy", arguments: PolicyKind.allCases, [true, false])
    fileprivate func staysIsolatedAfterWithdrawal(kind: PolicyKind, encrypt: Bool) async throws {
        let written = try await WrittenWhileManaged(kind, encrypt: encrypt)
        #expect(try written.files.isIsolated(atPath: written.file))
        written.withdraw()
        #expect(!written.files.policy.isManaged(alice))
        #expect(try written.files.isIsolated(atPath: written.file))
        for reader in bystanders { await written.expectRefused(to: reader) }
        await written.expectOwnerReads()
    }

    @Test("the owner index records isolation too (file systems without extended attributes)")
    func ownerIndexRecordsIsolation() async throws {
        let written = try await WrittenWhileManaged(.staticPolicy, encrypt: false, ownerStorage: .indexOnly)
        written.withdraw()
        for reader in bystanders { await written.expectRefused(to: reader) }
        await written.expectOwnerReads()
    }

    @Test("an administrative release makes a file alice's unmanaged data; refused while she is managed")
    func releaseLiftsIsolation() async throws {
        for encrypt in [true, false] {
            let written = try await WrittenWhileManaged(.staticPolicy, encrypt: encrypt)
            let error = protectionError { try written.files.releaseIsolation(atPath: written.file) }
            #expect(error?.code == 108, "alice is managed: her policy decides")
            #expect(try written.files.isIsolated(atPath: written.file))
            written.withdraw()
            try written.files.releaseIsolation(atPath: written.file)
            #expect(try !written.files.isIsolated(atPath: written.file))
            #expect(try written.files.protectionInfo(atPath: written.file) == ProtectionInfo(owner: alice, isEncrypted: false, keyID: nil, formatVersion: nil))
            let read = try IdentityContext.withThreadIdentity(carol) { try written.files.readFile(atPath: written.file) }
            #expect(String(decoding: read, as: UTF8.self) == secret)
            // One file released: the others stay isolated.
            let other = IdentityContext.withThreadIdentity(carol) { protectionError { try written.files.readFile(atPath: written.handleFile) } }
            #expect(other?.code == 108)
        }
    }

    @Test("a wipe removes what withdrawal left isolated; only alice may wipe it once she is not managed")
    func wipeRemovesIsolatedData() async throws {
        let written = try await WrittenWhileManaged(.staticPolicy, encrypt: false)
        written.withdraw()
        let refused = IdentityContext.withThreadIdentity(carol) { protectionError { try written.files.removeFiles(ownedBy: alice) } }
        #expect(refused?.code == 108)
        #expect(FileManager.default.fileExists(atPath: written.file))
        let removed = try IdentityContext.withThreadIdentity(alice) { try written.files.removeFiles(ownedBy: alice) }
        #expect(Set(removed) == Set([written.file, written.streamFile, written.handleFile].map(resolvedPath)))
        #expect(!FileManager.default.fileExists(atPath: written.file))
        let envelope = IdentityContext.withThreadIdentity(alice) { protectionError { try written.data.unprotect(written.envelope) } }
        #expect(envelope?.code == 103, "the keys are gone: no plaintext for anyone")
    }

    @Test("a plain file recorded before isolation was recorded stays isolated once read while its owner is managed")
    func legacyRecordStaysIsolated() async throws {
        let written = try await WrittenWhileManaged(.staticPolicy, encrypt: false)
        // What an earlier build wrote: the owner attribute alone.
        try POSIX.removeXattr(path: written.file, FileOwnerStore.isolationAttributeName)
        #expect(try written.files.isIsolated(atPath: written.file), "its owner is managed now")
        let whileManaged = IdentityContext.withThreadIdentity(carol) { protectionError { try written.files.readFile(atPath: written.file) } }
        #expect(whileManaged?.code == 108)
        written.withdraw()
        #expect(try written.files.isIsolated(atPath: written.file))
        for reader in bystanders {
            let error = IdentityContext.withThreadIdentity(reader) { protectionError { try written.files.readFile(atPath: written.file) } }
            #expect(error?.code == 108)
        }
        let own = try IdentityContext.withThreadIdentity(alice) { try written.files.readFile(atPath: written.file) }
        #expect(String(decoding: own, as: UTF8.self) == secret)
    }

    @Test("copies and rewrites the owner makes after the withdrawal keep the record", arguments: [true, false])
    func ownersCopiesStayIsolated(encrypt: Bool) async throws {
        let written = try await WrittenWhileManaged(.staticPolicy, encrypt: encrypt)
        written.withdraw()
        let copy = written.root + "/copy-by-alice.txt"
        let sealed = written.root + "/sealed-by-alice.idps"
        try IdentityContext.withThreadIdentity(alice) {
            try written.files.decryptFile(atPath: written.file, toPath: copy)
            try written.files.protect(atPath: written.file, toPath: sealed, owner: alice)
            // Re-protecting for herself writes an encrypted file anew in the clear (she is not managed now).
            try written.files.protect(atPath: written.handleFile, owner: alice)
        }
        for path in [copy, sealed, written.handleFile] {
            #expect(try written.files.isIsolated(atPath: path), "\(path)")
            for reader in bystanders {
                let error = IdentityContext.withThreadIdentity(reader) { protectionError { try written.files.readFile(atPath: path) } }
                #expect(error?.code == 108, "\(path) as \(String(describing: reader))")
            }
        }
        let out = written.root + "/out.txt"
        let error = IdentityContext.withThreadIdentity(carol) { protectionError { try written.files.unprotect(atPath: sealed, toPath: out) } }
        #expect(error?.code == 108)
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    @Test("an owner-index entry written before isolation was recorded stays isolated once read while its owner is managed")
    func legacyIndexEntryStaysIsolated() async throws {
        let written = try await WrittenWhileManaged(.staticPolicy, encrypt: false, ownerStorage: .indexOnly)
        let indexPath = written.files.stateDirectory + "/owners.index"
        let index = try #require(FileManager.default.contents(atPath: indexPath))
        let legacy = String(decoding: index, as: UTF8.self).replacingOccurrences(of: #""isolated":true,"#, with: "")
        #expect(legacy != String(decoding: index, as: UTF8.self), "the entries recorded isolation")
        try Data(legacy.utf8).write(to: URL(fileURLWithPath: indexPath))
        // A manager started on the state as an earlier build left it.
        let files = try FileProtectionManager(
            roots: [written.root], keyStore: written.files.keyStore, policy: written.files.policy,
            stateDirectory: written.files.stateDirectory, ownerStorage: .indexOnly)
        let whileManaged = IdentityContext.withThreadIdentity(carol) { protectionError { try files.readFile(atPath: written.file) } }
        #expect(whileManaged?.code == 108)
        written.withdraw()
        for reader in bystanders {
            let error = IdentityContext.withThreadIdentity(reader) { protectionError { try files.readFile(atPath: written.file) } }
            #expect(error?.code == 108)
        }
        let own = try IdentityContext.withThreadIdentity(alice) { try files.readFile(atPath: written.file) }
        #expect(String(decoding: own, as: UTF8.self) == secret)
    }

    @Test("data created while its owner was not managed stays readable by all after the owner leaves again")
    func unmanagedDataStaysOpen() throws {
        let f = try Fixture(isolated: true)
        let path = f.path("dave.txt")
        let dave: Identity = "dave@northwind.com"
        try IdentityContext.withThreadIdentity(dave) { try f.files.writeFile(atPath: path, contents: Data("open".utf8)) }
        let envelope = try f.data.protect(Data("open".utf8), owner: dave)
        #expect(try !f.files.isIsolated(atPath: path))
        let read = try IdentityContext.withThreadIdentity(carol) { try f.files.readFile(atPath: path) }
        #expect(read == Data("open".utf8))
        #expect(try f.data.unprotect(envelope) == Data("open".utf8))
    }
}

extension RecordedIsolationTests {
    @Test("data created while its owner was not managed is open again once a later management of its owner ends", arguments: [OwnerStorage.automatic, .indexOnly])
    func openDataIsNotUpgradedWhileManaged(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage, encryptionRequired: false, isolated: true)
        let path = f.path("dave.txt")
        let dave: Identity = "dave@northwind.com"
        try IdentityContext.withThreadIdentity(dave) { try f.files.writeFile(atPath: path, contents: Data("open".utf8)) }
        // Managed for a while: its policy governs (isolation), and the owner reads and rewrites nothing.
        f.policy.addManagedIdentity(dave)
        let whileManaged = IdentityContext.withThreadIdentity(carol) { protectionError { try f.files.readFile(atPath: path) } }
        #expect(whileManaged?.code == 108)
        #expect(try IdentityContext.withThreadIdentity(dave) { try f.files.readFile(atPath: path) } == Data("open".utf8))
        f.policy.removeManagedIdentity(dave)
        // Created while dave was not managed: recorded open, not mistaken for a record of an earlier build.
        #expect(try !f.files.isIsolated(atPath: path))
        #expect(try IdentityContext.withThreadIdentity(carol) { try f.files.readFile(atPath: path) } == Data("open".utf8))
    }

    @Test("a copy made while its owner is managed is isolated, also of a file recorded open", arguments: [OwnerStorage.automatic, .indexOnly])
    func copiesUnderManagementAreIsolated(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage, encryptionRequired: false, isolated: true)
        let path = f.path("dave.txt")
        let copy = f.path("dave-copy.txt")
        let dave: Identity = "dave@northwind.com"
        try IdentityContext.withThreadIdentity(dave) { try f.files.writeFile(atPath: path, contents: Data("open".utf8)) }
        f.policy.addManagedIdentity(dave)
        try IdentityContext.withThreadIdentity(dave) { try f.files.decryptFile(atPath: path, toPath: copy) }
        f.policy.removeManagedIdentity(dave)
        #expect(try !f.files.isIsolated(atPath: path))
        #expect(try f.files.isIsolated(atPath: copy))
        let error = IdentityContext.withThreadIdentity(carol) { protectionError { try f.files.readFile(atPath: copy) } }
        #expect(error?.code == 108)
    }

    @Test("a file protected again for its owner while the owner is managed is isolated", arguments: [OwnerStorage.automatic, .indexOnly])
    func protectedAgainUnderManagementIsIsolated(storage: OwnerStorage) throws {
        let f = try Fixture(ownerStorage: storage, encryptionRequired: false, isolated: true)
        let path = f.path("dave.txt")
        let dave: Identity = "dave@northwind.com"
        try IdentityContext.withThreadIdentity(dave) { try f.files.writeFile(atPath: path, contents: Data("open".utf8)) }
        f.policy.addManagedIdentity(dave)
        try IdentityContext.withThreadIdentity(dave) { try f.files.protect(atPath: path, owner: dave) }
        f.policy.removeManagedIdentity(dave)
        #expect(try f.files.isIsolated(atPath: path))
        let error = IdentityContext.withThreadIdentity(carol) { protectionError { try f.files.readFile(atPath: path) } }
        #expect(error?.code == 108)
    }

    @Test("what a handle writes while its owner is managed stays isolated after the owner leaves", arguments: [OwnerStorage.automatic, .indexOnly])
    func writesUnderManagementAreIsolated(storage: OwnerStorage) throws {
        try expectIsolatedAfterWritesWhileManaged(storage: storage) { files, path in
            let file = try files.openProtectedFile(atPath: path, options: [.read, .write])
            try file.write(Data("written while managed".utf8), at: 0)
            try file.close()
        }
    }

    @Test("what a plain FileHandle writes while its owner is managed stays isolated after the owner leaves",
          arguments: [OwnerStorage.automatic, .indexOnly], [FileOpenOptions.write, [.write, .append], [.read, .write]])
    func fileHandleWritesUnderManagementAreIsolated(storage: OwnerStorage, options: FileOpenOptions) throws {
        try expectIsolatedAfterWritesWhileManaged(storage: storage) { files, path in
            let handle = try files.openFile(atPath: path, options: options)
            try handle.write(contentsOf: Data("written while managed".utf8))
            try handle.close()
        }
    }

    /// Dave's plain file, written open, then written by `write` while dave is managed: once dave is not managed
    /// any more, the file is isolated and carol is refused (108).
    private func expectIsolatedAfterWritesWhileManaged(
        storage: OwnerStorage, write: (FileProtectionManager, String) throws -> Void
    ) throws {
        let f = try Fixture(ownerStorage: storage, encryptionRequired: false, isolated: true)
        let path = f.path("dave.txt")
        let dave: Identity = "dave@northwind.com"
        try IdentityContext.withThreadIdentity(dave) { try f.files.writeFile(atPath: path, contents: Data("open".utf8)) }
        f.policy.addManagedIdentity(dave)
        try IdentityContext.withThreadIdentity(dave) { try write(f.files, path) }
        f.policy.removeManagedIdentity(dave)
        #expect(try f.files.isIsolated(atPath: path))
        let error = IdentityContext.withThreadIdentity(carol) { protectionError { try f.files.readFile(atPath: path) } }
        #expect(error?.code == 108)
    }
}

/// The real path of `path` (the roots of a temporary directory may lie behind a symbolic link).
private func resolvedPath(_ path: String) -> String {
    guard let resolved = realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
}
