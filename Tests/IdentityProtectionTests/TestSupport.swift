import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

let alice: Identity = "alice@contoso.com"
let bob: Identity = "bob@contoso.com"
let carol: Identity = "carol@fabrikam.com"   // not managed
let mallory: Identity = "mallory@contoso.com"

/// A fresh directory with a key store, a policy managing alice, bob and mallory, and both managers.
///
/// The format, crypto and crash suites read every owner's data from any identity, so their policy opts out of
/// account isolation (`dataIsolation: false`, unless `isolated`); what isolation refuses is tested with it on
/// (`AccessCheckTests`, `StreamTests.splitsNeverMatter`, `DefaultIsolationTests`).
final class Fixture: Sendable {
    let directory: String
    let root: String
    let keys: FileKeyStore
    let policy: StaticManagedIdentityPolicy
    let data: DataProtectionManager
    let files: FileProtectionManager

    init(ownerStorage: OwnerStorage = .automatic, chunkSize: Int = 64 * 1024, encryptionRequired: Bool = true, isolated: Bool = false) throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("idp-test-XXXXXX").path
        var buffer = Array(template.utf8CString)
        guard mkdtemp(&buffer) != nil else { throw ProtectionError.ioFailure(path: template, operation: "mkdtemp", errno: errno) }
        directory = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        root = directory + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        keys = try FileKeyStore(atPath: directory + "/keys")
        policy = StaticManagedIdentityPolicy(managed: [alice, bob, mallory], fileEncryptionRequired: encryptionRequired, dataIsolation: isolated)
        data = DataProtectionManager(keyStore: keys, policy: policy)
        files = try FileProtectionManager(
            roots: [root], keyStore: keys, policy: policy, stateDirectory: directory + "/state",
            ownerStorage: ownerStorage, chunkSize: chunkSize)
    }

    func path(_ name: String) -> String { root + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` and returns the ProtectionError it throws (failing the test when it throws nothing or
/// something else).
func protectionError<R>(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> ProtectionError? {
    do {
        _ = try body()
        Issue.record("expected a ProtectionError, got success", sourceLocation: sourceLocation)
        return nil
    } catch let error as ProtectionError {
        return error
    } catch {
        Issue.record("expected a ProtectionError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

func bytes(of path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map(Array.init)
}

func writeRaw(_ bytes: [UInt8], to path: String) {
    precondition(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
}

let longTests = ProcessInfo.processInfo.environment["IDENTITY_LONG_TESTS"] == "1"

/// The length on disk of a file written by `encryptFile` (format version 2): header, the first size slot, and
/// every chunk in its first slot (the second slots are holes, except behind the last chunk, which ends the
/// file).
func encryptedFileLength(owner: Identity, chunkSize: Int, contentLength: Int) -> Int {
    let header = 8 + 1 + 1 + 2 + owner.name.utf8.count + 16 + 32 + 4
    guard contentLength > 0 else { return header + 48 }
    let chunks = (contentLength + chunkSize - 1) / chunkSize
    let last = contentLength - (chunks - 1) * chunkSize
    return header + 96 + (chunks - 1) * 2 * (chunkSize + 40) + last + 40
}

extension Sequence where Element: Sendable {
    /// The elements as an `AsyncStream` (all buffered up front).
    var async: AsyncStream<Element> {
        let elements = Array(self)
        return AsyncStream { continuation in
            for element in elements { continuation.yield(element) }
            continuation.finish()
        }
    }
}
