import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

/// A key store that holds the first request for `gated`'s current key until ``release()``: a write of that
/// account that has passed its access check and is fetching its key.
private final class GatedCurrentKeyStore: KeyStore {
    let inner: FileKeyStore
    let gated: Identity
    let reached = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)

    init(_ inner: FileKeyStore, gated: Identity) {
        self.inner = inner
        self.gated = gated
    }

    func release() { gate.signal() }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        if identity == gated {
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

@Suite("A tenant's wipe: accounts of the tenant it did not find are refused while it runs, and their writes in flight are wiped", .exclusiveProcessIdentity)
struct TenantWipeBlockTests {
    static let newcomer: Identity = "newcomer@contoso.com"

    @Test("an account of the tenant first seen during its wipe creates nothing and is not admitted until the wipe ends; other tenants go on")
    func accountFirstSeenDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let seen = LockedValue<[String]>([])
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            // The wipe has found its accounts (alice) and not yet walked the roots.
            guard account == alice else { return false }
            do {
                _ = try f.write("newcomer.txt", as: Self.newcomer, "written during the wipe")
                seen.withLock { $0.append("newcomer wrote") }
            } catch let ProtectionError.accountBlocked(identity, reason) {
                seen.withLock { $0.append("write refused: \(identity.name) blocked, reason \(reason)") }
            } catch {
                seen.withLock { $0.append("write: \(error)") }
            }
            do {
                _ = try f.manager.admitWithoutWaiting(Self.newcomer)
                seen.withLock { $0.append("newcomer admitted") }
            } catch let error as AdmissionError {
                seen.withLock { $0.append("admission: \(error.cause)") }
            } catch {
                seen.withLock { $0.append("admission, another error: \(error)") }
            }
            seen.withLock { $0.append("reason: \(f.manager.blockReason(for: Self.newcomer))") }
            do {
                _ = try f.write("carol-during.txt", as: carol, "another tenant")
                seen.withLock { $0.append("carol wrote") }
            } catch {
                seen.withLock { $0.append("carol: \(error)") }
            }
            return false
        })
        let report = await f.manager.wipeData(forTenant: "contoso.com")

        let during = seen.withLock { $0 }
        #expect(during.count == 4)
        #expect(during.first == "write refused: newcomer@contoso.com blocked, reason \(BlockAccountReason.wiped.rawValue)", "\(during)")
        #expect(during.dropFirst().first == "admission: \(AdmissionError.Cause.blocked(.wiped))", "\(during)")
        #expect(during.dropFirst(2).first == "reason: wiped", "\(during)")
        #expect(during.last == "carol wrote", "\(during)")
        #expect(report.accounts.map(\.account) == [alice])
        #expect(report.isComplete)
        #expect(!FileManager.default.fileExists(atPath: f.root + "/newcomer.txt"))
        // The tenant's block ended with the wipe: the newcomer had nothing wiped and is served; alice stays wiped.
        #expect(f.manager.blockReason(for: Self.newcomer) == .notBlocked)
        #expect(!f.manager.blockedAccounts.contains(Self.newcomer))
        #expect(try f.manager.admitWithoutWaiting(Self.newcomer))
        _ = try f.write("newcomer-after.txt", as: Self.newcomer, "after the wipe")
        #expect(f.manager.blockReason(for: alice) == .wiped)
    }

    @Test("a write of an account nobody knew, past its check when the tenant's wipe starts: the wipe takes the account, waits, and removes the file")
    func writeInFlightWhenTheWipeStarts() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let keys = GatedCurrentKeyStore(try FileKeyStore(atPath: directory.file("keys")), gated: Self.newcomer)
        let manager = PolicyManager(policySource: StaticPolicySource(tenants: ["contoso.com": ownedPolicy("contoso")]))
        let files = try FileProtectionManager(roots: [root], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
        manager.fileProtection = files
        try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: root + "/alice.txt", contents: Data("alice".utf8)) }

        let outcome = LockedValue<Result<Void, ProtectionError>?>(nil)
        let writer = Thread {
            do throws(ProtectionError) {
                try IdentityContext.withThreadIdentity(Self.newcomer) { () throws(ProtectionError) in
                    try files.writeFile(atPath: root + "/newcomer.txt", contents: Data("in flight".utf8))
                }
                outcome.withLock { $0 = .success(()) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        writer.start()
        // The newcomer's write has passed its check and waits for its key: no file of it is under the root yet.
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { keys.reached.wait(); continuation.resume() }
        }
        manager.delegate = ClosureDelegate(onWipe: { account in
            // Called once the wipe has found its accounts and before it walks the roots: the write ends first.
            if account == alice {
                keys.release()
                while outcome.withLock({ $0 }) == nil { usleep(1_000) }
            }
            return false
        })
        let report = await manager.wipeData(forTenant: "contoso.com")

        #expect(report.accounts.map(\.account) == [alice, Self.newcomer])
        #expect(report.isComplete)
        #expect(outcome.withLock { $0 } != nil)
        #expect(!FileManager.default.fileExists(atPath: root + "/newcomer.txt"))
        #expect(try files.ownersUnderRoots().isEmpty)
        #expect(manager.blockReason(for: Self.newcomer) == .wiped)
    }

    @Test("two wipes of one tenant at once: the tenant's block lasts until the second ends")
    func overlappingWipesOfOneTenant() async throws {
        var registry = BlockRegistry()
        registry.beginWipe(of: "contoso.com")
        registry.beginWipe(of: "contoso.com")
        #expect(registry.reason(for: Self.newcomer, tenant: "contoso.com") == .wiped)
        #expect(registry.reason(for: carol, tenant: "fabrikam.com") == nil)
        #expect(registry.reason(for: .unmanaged, tenant: "contoso.com") == nil)
        registry.endWipe(of: "contoso.com")
        #expect(registry.reason(for: Self.newcomer, tenant: "contoso.com") == .wiped)
        // The tenant's cause is not the account's: what blocking announces does not include it.
        #expect(registry.reason(for: Self.newcomer, standing: nil) == nil)
        registry.endWipe(of: "contoso.com")
        #expect(registry.reason(for: Self.newcomer, tenant: "contoso.com") == nil)
        #expect(registry.isEmpty)
    }
}
