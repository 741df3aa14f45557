import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("Policy manager regressions found by an adversarial review: load races, blocked readers, copies across tenants")
struct PolicyRegressionTests {
    @Test("P1 a source that finishes loading between the manager's reads of `policies` and `hasLoaded` (init)")
    func loadRaceAtInit() throws {
        let source = LatePolicySource(loadingAfterFirstRead: PolicySet(tenants: ["contoso.com": ownedPolicy("contoso")]))
        let f = try UnavailableFixture(source: source)
        #expect(source.hasLoaded)
        // The source has contoso's policy: alice must be managed, or every access refused with 115.
        let managed = f.manager.isManaged(alice)
        let refused = f.code { _ = try f.data.protect(Data("x".utf8), owner: alice) } == 115
        #expect(managed || refused, "manager: loaded, but alice unmanaged")
        let path = f.directory.file("root/alice.txt")
        try? IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("secret".utf8)) }
        if FileManager.default.fileExists(atPath: path) {
            #expect(try f.files.isFileEncrypted(atPath: path), "alice's file written in the clear")
            #expect(f.code { try IdentityContext.withThreadIdentity(carol) { _ = try f.files.readFile(atPath: path) } } != nil,
                    "carol (other tenant) read alice's file")
        }
    }

    @Test("P1b the same interleaving through the policySource setter (stale reload overwrites the fresh one)")
    func loadRaceAtSetter() throws {
        let f = try UnavailableFixture(source: LatePolicySource())
        let source = LatePolicySource(loadingAfterFirstRead: PolicySet(tenants: ["contoso.com": ownedPolicy("contoso")]))
        f.manager.policySource = source
        #expect(source.hasLoaded)
        let managed = f.manager.isManaged(alice)
        let refused = f.code { _ = try f.data.protect(Data("x".utf8), owner: alice) } == 115
        #expect(managed || refused, "manager: loaded, but alice unmanaged")
    }

    @Test("P2 a blocked account reads and modifies an unmanaged account's data though isDataTransferAllowed says no")
    func blockedReaderOfUnmanagedData() throws {
        let f = try IsolationFixture()
        f.manager.blockAccount(bob, reason: .blockedByAdministrator)
        #expect(f.manager.blockReason(for: bob) != .notBlocked)
        #expect(!f.manager.isDataTransferAllowed(from: dave, to: bob))
        let sealed = try f.data.protect(Data("dave's".utf8), owner: dave)
        // refusal(of:to:) is documented as 'a read by an effective file identity that may not see the owner's data
        // (isDataTransferAllowed(from:to:))'.
        #expect(throws: ProtectionError.self) { try IdentityContext.withThreadIdentity(bob) { try f.data.unprotect(sealed) } }
        let path = try f.write("dave.txt", as: dave, "dave's")
        #expect(throws: ProtectionError.self) { try IdentityContext.withThreadIdentity(bob) { try f.files.readFile(atPath: path) } }
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(bob) { try f.files.openFile(atPath: path, options: [.append]) }
        }
    }

    @Test("P3 with PolicyManager: another tenant replaces alice's file through decryptFile(toPath:)")
    func copyOverAcrossTenants() throws {
        let f = try IsolationFixture()
        let alices = try f.write("alice.txt", as: alice, "alice's")
        let carols = try f.write("carol.txt", as: carol, "carol's")
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(carol) { try f.files.writeFile(atPath: alices, contents: Data("x".utf8)) }
        }
        #expect(throws: ProtectionError.self) {
            try IdentityContext.withThreadIdentity(carol) { try f.files.decryptFile(atPath: carols, toPath: alices) }
        }
        #expect(try f.files.protectionInfo(atPath: alices)?.owner == alice)
        #expect(try f.files.isFileEncrypted(atPath: alices))
    }

}

/// The same race with a real background thread: the source's first read finishes on another thread while the
/// manager's initializer is between its read of `policies` (slow: 50 ms) and its read of `hasLoaded`.
final class SlowReadSource: PolicySource, @unchecked Sendable {
    private let inner = LatePolicySource()
    private let tenants: [TenantID: Policy]
    init(tenants: [TenantID: Policy]) { self.tenants = tenants }
    var policies: PolicySet {
        let snapshot = inner.policies
        usleep(50_000)
        return snapshot
    }
    var hasLoaded: Bool { inner.hasLoaded }
    func setChangeHandler(_ handler: (@Sendable () -> Void)?) { inner.setChangeHandler(handler) }
    func startBackgroundLoad() {
        let inner = inner, tenants = tenants
        Thread.detachNewThread { usleep(10_000); inner.load(tenants: tenants) }
    }
}

@Suite("Policy manager regressions: a first load on another thread during init")
struct PolicyRaceRegressionTests {
    @Test("P1c background first load during PolicyManager.init: the manager ends loaded with no policies")
    func realThreadRace() throws {
        let source = SlowReadSource(tenants: ["contoso.com": ownedPolicy("contoso")])
        source.startBackgroundLoad()
        let manager = PolicyManager(settings: RuntimeSettings(), policySource: source)
        usleep(100_000)
        #expect(source.hasLoaded)
        #expect(manager.isManaged(alice), "source loaded contoso's policy; manager does not manage alice")
        #expect(!manager.isDataTransferAllowed(from: alice, to: dave), "alice's data may go to an unmanaged gmail account")
    }
}
