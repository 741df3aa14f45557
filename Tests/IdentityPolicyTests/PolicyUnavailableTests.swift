import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

/// The managers and a file over one policy manager, in a fresh directory.
struct UnavailableFixture {
    let directory: TemporaryDirectory
    let manager: PolicyManager
    let keys: FileKeyStore
    let data: DataProtectionManager
    let files: FileProtectionManager

    init(settings: RuntimeSettings = RuntimeSettings(), source: (any PolicySource)?) throws {
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("root"), withIntermediateDirectories: true)
        manager = PolicyManager(settings: settings, policySource: source)
        keys = try FileKeyStore(atPath: directory.file("keys"))
        data = DataProtectionManager(keyStore: keys, policy: manager)
        files = try FileProtectionManager(roots: [directory.file("root")], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
    }

    func code(_ body: () throws -> Void) -> Int? {
        do { try body(); return nil } catch let error as ProtectionError { return error.code } catch { return -1 }
    }
}

@Suite("Deny by default: no decision on owned data before the policies loaded")
struct PolicyUnavailableTests {
    @Test("before the source loads: creating, reading and transferring owned data are refused with 115; nothing is written")
    func refusedUntilLoaded() throws {
        let source = LatePolicySource()
        let f = try UnavailableFixture(source: source)
        // An envelope of alice made elsewhere with the same keys (so only the access check stands in the way).
        let elsewhere = DataProtectionManager(keyStore: f.keys, policy: StaticManagedIdentityPolicy(managed: [alice], dataIsolation: false))
        let sealed = try elsewhere.protect(Data("alice's".utf8), owner: alice)
        let path = f.directory.file("root/alice.txt")

        for reader in [alice, bob, carol, nil] as [Identity?] {
            IdentityContext.withThreadIdentity(reader) {
                #expect(f.code { _ = try f.data.unprotect(sealed) } == 115, "\(String(describing: reader))")
            }
        }
        #expect(f.code { _ = try f.data.protect(Data("x".utf8), owner: alice) } == 115)
        IdentityContext.withThreadIdentity(alice) {
            #expect(f.code { try f.files.writeFile(atPath: path, contents: Data("in the clear?".utf8)) } == 115)
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!f.manager.isDataTransferAllowed(from: alice, to: alice))
        #expect(!f.manager.isDataTransferAllowed(from: nil, to: bob))
        #expect(f.manager.isDataTransferAllowed(from: nil, to: nil))
        #expect(f.manager.isDataTransferAllowed(from: .unmanaged, to: nil))
        // Unowned data needs no decision.
        #expect(try f.data.unprotect(try f.data.protect(Data("open".utf8), owner: .unmanaged)) == Data("open".utf8))

        // Loaded: alice's tenant encrypts, and the ordinary rules apply.
        source.load(tenants: ["contoso.com": ownedPolicy("contoso")])
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.data.unprotect(sealed) } == Data("alice's".utf8))
        #expect(f.code { try IdentityContext.withThreadIdentity(carol) { _ = try f.data.unprotect(sealed) } } == 108)
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("encrypted".utf8)) }
        #expect(try f.files.isFileEncrypted(atPath: path))
        #expect(f.manager.isDataTransferAllowed(from: alice, to: bob))
    }

    @Test("a source that loads with no policy at all still ends the refusals")
    func loadedEmpty() throws {
        let source = LatePolicySource()
        let f = try UnavailableFixture(source: source)
        #expect(f.code { _ = try f.data.protect(Data("x".utf8), owner: alice) } == 115)
        source.load()
        #expect(f.code { _ = try f.data.protect(Data("x".utf8), owner: alice) } == nil)
    }

    @Test("settings.policyDirectory is read before the manager's first decision: managed at once, no race")
    func settingsDirectoryReadFirst() throws {
        let policies = try TemporaryDirectory()
        try policies.write("contoso.json", #"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": true}"#)
        var settings = RuntimeSettings()
        settings.policyDirectory = policies.path
        settings.policyPollInterval = 3_600
        let f = try UnavailableFixture(settings: settings, source: nil)
        #expect(f.manager.isManaged(alice))
        let path = f.directory.file("root/report.txt")
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("q3".utf8)) }
        #expect(try f.files.isFileEncrypted(atPath: path))
        #expect(f.code { try IdentityContext.withThreadIdentity(carol) { _ = try f.files.readFile(atPath: path) } } == 108)
    }

    @Test("settings.policyDirectory not readable yet: refused with 115 until run() reads it")
    func settingsDirectoryLate() async throws {
        let parent = try TemporaryDirectory()
        let late = parent.file("policies")
        var settings = RuntimeSettings()
        settings.policyDirectory = late
        settings.policyPollInterval = 0.02
        let f = try UnavailableFixture(settings: settings, source: nil)
        let work = Task { [manager = f.manager] in await manager.run() }
        defer { work.cancel() }
        #expect(f.code { _ = try f.data.protect(Data("x".utf8), owner: alice) } == 115)
        try FileManager.default.createDirectory(atPath: late, withIntermediateDirectories: true)
        try Data(#"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": true}"#.utf8)
            .write(to: URL(fileURLWithPath: late + "/contoso.json"))
        let data = f.data
        #expect(await eventually(within: 30) { (try? data.protect(Data("x".utf8), owner: alice)) != nil })
        #expect(f.manager.isManaged(alice))
    }
}

@Suite("Admission before the policy source has loaded")
struct AdmissionBeforeLoadTests {
    @Test("nobody but the unmanaged identity is admitted until the first load; afterwards the same call is")
    func refusedUntilLoaded() async throws {
        let source = LatePolicySource()
        let manager = PolicyManager(policySource: source)
        let alice: Identity = "alice@contoso.com"
        let ran = LockedValue(0)
        await #expect(throws: AdmissionError(account: alice, result: .failed, cause: .unavailable("the policy source has not loaded its policies yet"))) {
            try await manager.withAdmittedIdentity(alice) { ran.withLock { $0 += 1 } }
        }
        let stranger: Identity = "someone@elsewhere.example"
        await #expect(throws: AdmissionError.self) {
            try await manager.withAdmittedIdentity(stranger) { ran.withLock { $0 += 1 } }
        }
        #expect(ran.withLock { $0 } == 0)
        // The unmanaged identity owns nothing to protect: it is admitted, and still refused on owned data.
        try await manager.withAdmittedIdentity(.unmanaged) { ran.withLock { $0 += 1 } }
        #expect(ran.withLock { $0 } == 1)
        source.load([alice: Policy(identity: nil)])
        let seen = try await manager.withAdmittedIdentity(alice) { IdentityContext.currentThreadIdentity }
        #expect(seen == alice)
    }
}
