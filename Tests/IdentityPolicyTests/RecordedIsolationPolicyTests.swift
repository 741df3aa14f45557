import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// The ways a `PolicyManager` stops managing an account without a wipe.
enum Withdrawal: String, CaseIterable, CustomTestStringConvertible, Sendable {
    /// alice is managed by her own document, which is deleted.
    case ownDocumentDeleted
    /// alice is registered in contoso.com, whose tenant document is deleted.
    case tenantDocumentDeleted
    /// alice is enrolled, then unenrolled.
    case unenrolled
    /// alice is the second enrolled account, then `maxManagedAccounts` becomes 1.
    case managedAccountLimitLowered

    var testDescription: String { rawValue }
}

/// A `PolicyManager` over a `DirectoryPolicySource` managing alice one way, and carol (fabrikam.com, a
/// registered account of a tenant document) throughout; dave is never managed.
struct WithdrawalFixture {
    let directory: TemporaryDirectory
    let source: DirectoryPolicySource
    let manager: PolicyManager
    let data: DataProtectionManager
    let files: FileProtectionManager
    let root: String
    let way: Withdrawal

    init(_ way: Withdrawal, encrypt: Bool) throws {
        self.way = way
        directory = try TemporaryDirectory()
        let documents = directory.file("policies")
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: true)
        root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try directory.write("policies/fabrikam.json", #"{"formatVersion": 1, "tenant": "fabrikam.com", "fileEncryptionRequired": true}"#)
        switch way {
        case .ownDocumentDeleted:
            try directory.write("policies/alice.json", #"{"formatVersion": 1, "account": "alice@contoso.com", "fileEncryptionRequired": \#(encrypt)}"#)
        case .tenantDocumentDeleted:
            try directory.write("policies/contoso.json", #"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": \#(encrypt)}"#)
        case .unenrolled, .managedAccountLimitLowered:
            break
        }
        source = try DirectoryPolicySource(directory: documents)
        manager = PolicyManager(policySource: source)
        manager.registerAccount(carol)
        switch way {
        case .ownDocumentDeleted: break
        case .tenantDocumentDeleted: manager.registerAccount(alice)
        case .unenrolled: manager.setEnrolled(alice, true)
        case .managedAccountLimitLowered:
            manager.setEnrolled(bob, true)
            manager.setEnrolled(alice, true)
        }
        let keys = try FileKeyStore(atPath: directory.file("keys"))
        data = DataProtectionManager(keyStore: keys, policy: manager)
        files = try FileProtectionManager(roots: [root], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
        manager.fileProtection = files
    }

    /// Stops managing alice this fixture's way.
    func withdraw() {
        switch way {
        case .ownDocumentDeleted:
            try? FileManager.default.removeItem(atPath: directory.file("policies/alice.json"))
            source.reload()
        case .tenantDocumentDeleted:
            try? FileManager.default.removeItem(atPath: directory.file("policies/contoso.json"))
            source.reload()
        case .unenrolled:
            manager.setEnrolled(alice, false)
        case .managedAccountLimitLowered:
            var settings = manager.settings
            settings.maxManagedAccounts = 1
            manager.settings = settings
        }
    }
}

/// Every read of alice's data (envelope, stream, file, `ProtectedFile`) as `reader`, and a modification
/// (`writeFile` over her file): the text each returned, or its error.
func attempts(
    _ f: WithdrawalFixture, envelope: Data, stream: [UInt8], file: String, handleFile: String, as reader: Identity?
) async -> [String: Result<String, ProtectionError>] {
    func attempt(_ body: () async throws -> Data) async -> Result<String, ProtectionError> {
        do { return .success(String(decoding: try await body(), as: UTF8.self)) } catch let error as ProtectionError {
            return .failure(error)
        } catch {
            return .failure(.cryptoBackendFailure("not a ProtectionError: \(error)"))
        }
    }
    return await IdentityContext.withThreadIdentity(reader) {
        [
            "unprotect(envelope)": await attempt { try f.data.unprotect(envelope) },
            "unprotect(stream)": await attempt { Data(try await f.data.unprotect([stream].asAsyncStream).collect()) },
            "readFile": await attempt { try f.files.readFile(atPath: file) },
            "ProtectedFile": await attempt {
                let handle = try f.files.openProtectedFile(atPath: handleFile, options: [.read])
                defer { try? handle.close() }
                return Data(try handle.readToEnd())
            },
            "writeFile over it": await attempt {
                try f.files.writeFile(atPath: file, contents: Data("overwritten".utf8))
                return Data()
            },
        ]
    }
}

@Suite("PolicyManager: data written while an account was managed stays isolated after the policy is withdrawn")
struct RecordedIsolationPolicyTests {
    static let secret = "alice's pipeline"

    @Test("bob of another tenant, an unmanaged account, \"\" and no identity get 108 and no plaintext; alice reads; a wipe removes it",
          arguments: Withdrawal.allCases, [true, false])
    func withdrawnPolicyKeepsIsolation(way: Withdrawal, encrypt: Bool) async throws {
        let f = try WithdrawalFixture(way, encrypt: encrypt)
        #expect(f.manager.isIdentityManaged(alice))
        let file = f.root + "/pipeline.txt"
        let handleFile = f.root + "/handle.bin"
        let envelope = try IdentityContext.withThreadIdentity(alice) { () throws -> Data in
            try f.files.writeFile(atPath: file, contents: Data(Self.secret.utf8))
            let handle = try f.files.openProtectedFile(atPath: handleFile, options: [.read, .write, .create])
            try handle.write(Array(Self.secret.utf8))
            try handle.close()
            return try f.data.protect(Data(Self.secret.utf8))
        }
        let stream = try await f.data.protect([Array(Self.secret.utf8)].asAsyncStream, owner: alice).collect()

        f.withdraw()
        #expect(!f.manager.isIdentityManaged(alice), "\(way)")
        // Lowering the limit leaves bob the only managed account; carol reads as an unmanaged account then.
        #expect(f.manager.isIdentityManaged(carol) == (way != .managedAccountLimitLowered))

        for reader in [carol, "dave@northwind.com", Identity.unmanaged, nil] as [Identity?] {
            for (name, result) in await attempts(f, envelope: envelope, stream: stream, file: file, handleFile: handleFile, as: reader) {
                switch result {
                case .success(let text): Issue.record("\(name) as \(String(describing: reader)) returned \(text.debugDescription)")
                case .failure(let error): #expect(error.code == 108, "\(name) as \(String(describing: reader)): \(error)")
                }
            }
        }
        for (name, result) in await attempts(f, envelope: envelope, stream: stream, file: file, handleFile: handleFile, as: alice)
        where name != "writeFile over it" {
            #expect((try? result.get()) == Self.secret, "\(name) as alice: \(result)")
        }

        _ = await f.manager.wipeData(forAccount: alice)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(!FileManager.default.fileExists(atPath: handleFile))
        let afterWipe = IdentityContext.withThreadIdentity(alice) { () -> ProtectionError? in
            do { _ = try f.data.unprotect(envelope); return nil } catch { return error as? ProtectionError }
        }
        #expect(afterWipe != nil, "no plaintext after the wipe")
    }
}

extension Array where Element: Sendable {
    /// The elements as an `AsyncStream` (all buffered up front).
    fileprivate var asAsyncStream: AsyncStream<Element> {
        let elements = self
        return AsyncStream { continuation in
            for element in elements { continuation.yield(element) }
            continuation.finish()
        }
    }
}
