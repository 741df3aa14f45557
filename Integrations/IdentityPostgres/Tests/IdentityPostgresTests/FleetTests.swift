import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import PostgresNIO
import NIOConcurrencyHelpers
import Testing

/// Everything that needs the server, in one serialized suite: the kill-and-restart test stops the server that
/// every other test uses. Each test makes its own database.
@Suite("PostgreSQL fleet (real server)", .serialized, .enabled(if: TestDatabase.isConfigured, TestDatabase.skipReason))
struct FleetTests {}

@Suite("Without a database")
struct OfflineTests {
    @Test("the KEK text form: current first, old ones kept, bad entries refused without quoting key bytes")
    func kekText() throws {
        let one = Data(repeating: 1, count: 32).base64
        let two = Data(repeating: 2, count: 32).base64
        let keks = try StaticKeyEncryptionKeys(text: "new:\(one), old:\(two)")
        #expect(keks.currentKeyEncryptionKeyID == "new")
        #expect(keks.keyEncryptionKeyIDs == ["new", "old"])
        #expect(throws: StaticKeyEncryptionKeys.LoadError.empty) { try StaticKeyEncryptionKeys(text: " ") }
        #expect(throws: StaticKeyEncryptionKeys.LoadError.self) { try StaticKeyEncryptionKeys(text: "a:\(Data(count: 16).base64)") }
        #expect(throws: StaticKeyEncryptionKeys.LoadError.self) { try StaticKeyEncryptionKeys(text: "a:\(one),a:\(two)") }
        #expect(throws: StaticKeyEncryptionKeys.LoadError.missingVariable("NOPE")) {
            try StaticKeyEncryptionKeys(environmentVariable: "NOPE", environment: [:])
        }
        // A key wrapped under the old KEK unwraps while the new one is current; an unknown KEK id refuses (113).
        let key = try ProtectionKey.generate()
        let oldOnly = try StaticKeyEncryptionKeys(text: "old:\(two)")
        let (id, wrapped) = try oldOnly.wrap(key, context: [7])
        #expect(id == "old")
        #expect(try keks.unwrap(wrapped, keyID: key.id, keyEncryptionKeyID: id, context: [7]) == key)
        #expect(throws: ProtectionError.authenticationFailed) {
            try keks.unwrap(wrapped, keyID: key.id, keyEncryptionKeyID: id, context: [8])
        }
        #expect(throws: (any Error).self) {
            try StaticKeyEncryptionKeys(text: "x:\(one)").unwrap(wrapped, keyID: key.id, keyEncryptionKeyID: "old", context: [7])
        }
    }

    @Test("a KEK file readable by others is refused")
    func kekFileMode() throws {
        let path = NSTemporaryDirectory() + "kek-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("k:\(Data(repeating: 3, count: 32).base64)\n".utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        #expect(throws: StaticKeyEncryptionKeys.LoadError.self) { try StaticKeyEncryptionKeys(file: path) }
        chmod(path, 0o600)
        #expect(try StaticKeyEncryptionKeys(file: path).currentKeyEncryptionKeyID == "k")
    }

    @Test("database down at start: typed errors, no hang, nothing cached, the policy source keeps nothing and reports")
    func downAtStart() async throws {
        // A port nothing listens on.
        var configuration = PostgresFleetConfiguration(host: "127.0.0.1", port: 1, username: "nobody")
        configuration.connectTimeout = 0.5
        configuration.queryTimeout = 0.5
        let fleet = PostgresFleet(configuration: configuration)
        defer { fleet.shutdown() }
        await #expect(throws: PostgresFleetError.self) { try await fleet.waitUntilReady(timeout: 1) }
        let keys = PostgresKeyStore(fleet: fleet, keyEncryptionKeys: try StaticKeyEncryptionKeys(text: TestDatabase.makeKEKText()))
        let account = Identity("alice@contoso.com")
        let id = try ProtectionKeyID.random()
        // The synchronous requirements, from a GCD thread (where they may block): typed errors.
        let codes = await onDispatchThread { () -> [Int?] in
            var codes: [Int?] = []
            for _ in 0..<3 { codes.append(Self.code { () throws(ProtectionError) in try keys.currentKey(for: account) }) }
            codes.append(Self.code { () throws(ProtectionError) in try keys.rotateKey(for: account) })
            codes.append(Self.code { () throws(ProtectionError) in try keys.destroyKeys(for: account) })
            // Unavailable is never reported as "no such key".
            codes.append(Self.code { () throws(ProtectionError) in try keys.key(withID: id, for: account) })
            return codes
        }
        #expect(codes == Array(repeating: 113, count: 6))
        // The asynchronous ones, awaited: the same.
        let deadline = ContinuousClock.now + .seconds(2)
        await #expect(throws: ProtectionError.self) { try await keys.currentKey(for: account, deadline: deadline) }
        await #expect(throws: ProtectionError.self) { try await keys.key(withID: id, for: account, deadline: deadline) }
        await #expect(throws: ProtectionError.self) { try await keys.rotateKey(for: account, deadline: deadline) }
        await #expect(throws: ProtectionError.self) { try await keys.destroyKeys(for: account, deadline: deadline) }
        let source = PostgresPolicySource(fleet: fleet)
        await #expect(throws: PostgresFleetError.self) { try await source.reload() }
        #expect(source.policies == .empty)
        #expect(source.errors.contains { if case .directoryUnreadable = $0 { true } else { false } })
        #expect(!fleet.status.isConnected && !fleet.status.isListening)
    }

    /// The code of the `ProtectionError` that `body` throws; `nil` when it throws none.
    static func code<T>(_ body: () throws(ProtectionError) -> T) -> Int? {
        do throws(ProtectionError) {
            _ = try body()
            return nil
        } catch {
            return error.code
        }
    }
}

/// Runs `body` on a GCD thread, where the stores' synchronous requirements may block, and returns its result.
func onDispatchThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: body()) }
    }
}
