import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import IsolationStress
import Testing

/// alice and bob in contoso (sameTenant), carol and erin in fabrikam (erin's own document lets data go
/// anywhere), frank in northwind (no transfers at all); dave is unmanaged.
struct IsolationFixture {
    let directory: TemporaryDirectory
    let root: String
    let manager: PolicyManager
    let keys: FileKeyStore
    let data: DataProtectionManager
    let files: FileProtectionManager

    init(settings: RuntimeSettings = RuntimeSettings()) throws {
        directory = try TemporaryDirectory()
        root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        var anywhere = ownedPolicy("erin")
        anywhere.dataTransfer = .any
        var nowhere = ownedPolicy("frank", encrypt: false)
        nowhere.dataTransfer = .none
        manager = PolicyManager(settings: settings, policySource: StaticPolicySource(
            [erin: anywhere, frank: nowhere],
            tenants: ["contoso.com": ownedPolicy("contoso"), "fabrikam.com": ownedPolicy("fabrikam", encrypt: false)]))
        keys = try FileKeyStore(atPath: directory.file("keys"))
        data = DataProtectionManager(keyStore: keys, policy: manager)
        files = try FileProtectionManager(roots: [root], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
        manager.fileProtection = files
    }

    func write(_ name: String, as owner: Identity?, _ text: String) throws -> String {
        let path = root + "/" + name
        try IdentityContext.withThreadIdentity(owner) { try files.writeFile(atPath: path, contents: Data(text.utf8)) }
        return path
    }
}

/// Every read API, as `reader`: the plaintext, or the error.
func readEverywhere(_ f: IsolationFixture, envelope: Data, path: String, as reader: Identity?) -> [String: Result<Data, ProtectionError>] {
    IdentityContext.withThreadIdentity(reader) {
        func attempt(_ body: () throws -> Data) -> Result<Data, ProtectionError> {
            do { return .success(try body()) } catch let error as ProtectionError { return .failure(error) } catch {
                return .failure(.cryptoBackendFailure("not a ProtectionError: \(error)"))
            }
        }
        let copy = path + ".copy"
        defer { try? FileManager.default.removeItem(atPath: copy) }
        return [
            "unprotect": attempt { try f.data.unprotect(envelope) },
            "readFile": attempt { try f.files.readFile(atPath: path) },
            "decryptFile(toPath:)": attempt {
                try f.files.decryptFile(atPath: path, toPath: copy)
                return FileManager.default.contents(atPath: copy) ?? Data()
            },
            "openProtectedFile": attempt {
                let file = try f.files.openProtectedFile(atPath: path, options: [.read])
                defer { try? file.close() }
                return Data(try file.readToEnd())
            },
            "protect(atPath:toPath:) then unprotect": attempt {
                let sealed = path + ".idps"
                defer { try? FileManager.default.removeItem(atPath: sealed) }
                try f.files.protect(atPath: path, toPath: sealed)
                try f.files.unprotect(atPath: sealed, toPath: copy)
                return FileManager.default.contents(atPath: copy) ?? Data()
            },
        ]
    }
}

@Suite("Tenant isolation: reads across accounts, transfers, re-owning (article ServiceBoundary)", .exclusiveProcessIdentity)
struct IsolationTests {
    @Test("a managed account's data: the owner and managed accounts of its tenant read it; no one else gets a byte", arguments: [
        (Identity?.some(alice), true), (.some(bob), true), (.some(carol), false), (.some(frank), false),
        (.some(dave), false), (.some(.unmanaged), false), (nil, false),
    ])
    func reads(reader: Identity?, allowed: Bool) throws {
        let f = try IsolationFixture()
        let secret = "alice's salary 123456"
        let envelope = try IdentityContext.withThreadIdentity(alice) { try f.data.protect(Data(secret.utf8)) }
        let path = try f.write("a.txt", as: alice, secret)
        for (api, result) in readEverywhere(f, envelope: envelope, path: path, as: reader) {
            switch result {
            case let .success(bytes):
                #expect(allowed, "\(api) by \(String(describing: reader)) was allowed")
                #expect(bytes == Data(secret.utf8), "\(api)")
            case let .failure(error):
                #expect(!allowed, "\(api): \(error)")
                #expect(error == .accessDenied(identity: alice, reader: reader), "\(api): \(error)")
                #expect(error.code == 108)
            }
        }
        #expect(!FileManager.default.fileExists(atPath: path + ".copy"))
    }

    @Test("unmanaged data is readable by everyone; a policy of 'any' lets an account's data go anywhere")
    func openData() throws {
        let f = try IsolationFixture()
        let mine = try IdentityContext.withThreadIdentity(dave) { try f.data.protect(Data("dave".utf8)) }
        let erins = try IdentityContext.withThreadIdentity(erin) { try f.data.protect(Data("erin".utf8)) }
        for reader in [alice, frank, .unmanaged] as [Identity] {
            let read = try IdentityContext.withThreadIdentity(reader) { try [f.data.unprotect(mine), f.data.unprotect(erins)] }
            #expect(read == [Data("dave".utf8), Data("erin".utf8)])
        }
        #expect(try f.data.unprotect(Data("plain".utf8)) == Data("plain".utf8))
    }

    @Test("dataIsolation = false gives the SDK's behaviour: any code reads any account's data")
    func isolationOff() throws {
        var settings = RuntimeSettings()
        settings.dataIsolation = false
        let f = try IsolationFixture(settings: settings)
        let envelope = try IdentityContext.withThreadIdentity(alice) { try f.data.protect(Data("a".utf8)) }
        #expect(try f.data.unprotect(envelope) == Data("a".utf8))
        #expect(try IdentityContext.withThreadIdentity(carol) { try f.data.unprotect(envelope) } == Data("a".utf8))
    }

    @Test("isDataTransferAllowed: unmanaged data anywhere; same tenant by default; none, managed accounts, any by policy", arguments: [
        (Identity?.some(dave), Identity?.some(carol), true), (nil, .some(alice), true), (.some(alice), .some(alice), true),
        (.some(alice), .some(bob), true), (.some(alice), .some(carol), false), (.some(alice), .some(dave), false),
        (.some(alice), nil, false), (.some(frank), .some(frank), true), (.some(frank), .some(alice), false),
        (.some(erin), .some(dave), true), (.some(erin), nil, true), (.some(carol), .some(erin), true),
    ])
    func transfers(source: Identity?, target: Identity?, expected: Bool) throws {
        let f = try IsolationFixture()
        #expect(f.manager.isDataTransferAllowed(from: source, to: target) == expected)
    }

    @Test("a blocked source or target: no transfer, whoever the other side is and whether or not either is managed")
    func blockedTransfers() throws {
        let f = try IsolationFixture()
        f.manager.blockAccount(bob, reason: .clockedOut)
        #expect(!f.manager.isDataTransferAllowed(from: alice, to: bob))
        #expect(!f.manager.isDataTransferAllowed(from: bob, to: alice))
        #expect(!f.manager.isDataTransferAllowed(from: bob, to: bob))
        // Unmanaged data (no owner, "", an unmanaged account) does not go to a blocked account either.
        #expect(!f.manager.isDataTransferAllowed(from: nil, to: bob))
        #expect(!f.manager.isDataTransferAllowed(from: .unmanaged, to: bob))
        #expect(!f.manager.isDataTransferAllowed(from: dave, to: bob))
        // A blocked unmanaged account: nothing from it, nothing to it.
        f.manager.blockAccount(dave, reason: .conditionalLaunchBlocked)
        #expect(!f.manager.isDataTransferAllowed(from: dave, to: alice))
        #expect(!f.manager.isDataTransferAllowed(from: dave, to: nil))
        #expect(!f.manager.isDataTransferAllowed(from: nil, to: dave))
        #expect(!f.manager.isDataTransferAllowed(from: erin, to: dave))
        // Unblocked, the ordinary rules again.
        f.manager.unblockAccount(bob)
        f.manager.unblockAccount(dave)
        #expect(f.manager.isDataTransferAllowed(from: alice, to: bob))
        #expect(f.manager.isDataTransferAllowed(from: nil, to: dave))
        #expect(f.manager.isDataTransferAllowed(from: dave, to: alice))
    }

    @Test("modifying another tenant's file is refused even when the call names its owner: truncate, write, replace")
    func modifyAcrossTenants() throws {
        let f = try IsolationFixture()
        let path = try f.write("alice.txt", as: alice, "contoso numbers")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        for stranger in [carol, dave, Identity.unmanaged, nil] as [Identity?] {
            IdentityContext.withThreadIdentity(stranger) {
                #expect(throws: ProtectionError.self) {
                    _ = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: alice)
                }
                #expect(throws: ProtectionError.self) { _ = try f.files.openProtectedFile(atPath: path, options: [.write]) }
                #expect(throws: ProtectionError.self) { try f.files.writeFile(atPath: path, contents: Data("mine now".utf8)) }
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        }
        // bob, same tenant (sameTenant transfers), may.
        try IdentityContext.withThreadIdentity(bob) {
            let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: alice)
            try file.write(Array("bob's edit".utf8))
            try file.close()
        }
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) } == Data("bob's edit".utf8))
    }

    @Test("re-owning a file goes through the transfer check; a refused re-own changes nothing")
    func reowning() throws {
        let f = try IsolationFixture()
        let path = try f.write("a.txt", as: alice, "contoso data")
        IdentityContext.withThreadIdentity(alice) {
            #expect(throws: ProtectionError.accessDenied(identity: alice, reader: carol)) { try f.files.protect(atPath: path, owner: carol) }
            #expect(throws: ProtectionError.accessDenied(identity: alice, reader: carol)) { try f.files.encryptFile(atPath: path, owner: carol) }
        }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == alice)
        // A caller that may not see alice's data cannot hand it on, not even within her tenant.
        for caller in [carol, dave, nil] as [Identity?] {
            #expect(throws: ProtectionError.accessDenied(identity: alice, reader: caller)) {
                try IdentityContext.withThreadIdentity(caller) { try f.files.protect(atPath: path, owner: bob) }
            }
        }
        // Overwriting another tenant's file is handing it over too.
        #expect(throws: ProtectionError.accessDenied(identity: alice, reader: carol)) {
            try IdentityContext.withThreadIdentity(carol) { try f.files.writeFile(atPath: path, contents: Data("carol's".utf8)) }
        }
        try IdentityContext.withThreadIdentity(alice) { try f.files.protect(atPath: path, owner: bob) }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == bob)
        #expect(try IdentityContext.withThreadIdentity(bob) { try f.files.readFile(atPath: path) } == Data("contoso data".utf8))
        let franks = try f.write("f.txt", as: frank, "northwind data")
        #expect(throws: ProtectionError.accessDenied(identity: frank, reader: alice)) {
            try IdentityContext.withThreadIdentity(frank) { try f.files.protect(atPath: franks, owner: alice) }
        }
    }

    @Test("openFile checks before it touches the file: a refused truncation empties nothing, a refused creation leaves nothing")
    func openFileChecksFirst() throws {
        let f = try IsolationFixture()
        let path = try f.write("a.txt", as: alice, "keep me")
        #expect(throws: ProtectionError.accessDenied(identity: alice, reader: carol)) {
            try IdentityContext.withThreadIdentity(carol) { try f.files.openFile(atPath: path, options: [.write, .truncate]) }
        }
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) } == Data("keep me".utf8))
        f.manager.blockAccount(carol, reason: .blockedByAdministrator)
        let fresh = f.root + "/new.txt"
        #expect(throws: ProtectionError.accountBlocked(identity: carol, reason: 101)) {
            try IdentityContext.withThreadIdentity(carol) { try f.files.openFile(atPath: fresh, options: [.write, .create]) }
        }
        #expect(!FileManager.default.fileExists(atPath: fresh))
    }

    @Test("an open ProtectedFile stops reading and writing when its owner or its opener is blocked, and works again when unblocked")
    func openHandlesFollowBlocks() throws {
        let f = try IsolationFixture()
        let path = try f.write("handle.txt", as: alice, "0123456789")
        let (reader, writer) = try IdentityContext.withThreadIdentity(alice) {
            (try f.files.openProtectedFile(atPath: path, options: [.read]), try f.files.openProtectedFile(atPath: path, options: [.read, .write]))
        }
        let created = try IdentityContext.withThreadIdentity(bob) {
            try f.files.openProtectedFile(atPath: f.root + "/bob.bin", options: [.read, .write, .create])
        }
        defer { try? reader.close(); try? writer.close(); try? created.close() }
        #expect(reader.opener == alice && writer.opener == alice && created.opener == bob)
        #expect(try reader.read(at: 0, upToCount: 4) == Array("0123".utf8))
        f.manager.blockAccount(alice, reason: .clockedOut)
        // Whatever identity the handle is used from: the access is the opener's.
        for caller in [alice, bob, nil] as [Identity?] {
            IdentityContext.withThreadIdentity(caller) {
                #expect(throws: ProtectionError.accountBlocked(identity: alice, reason: BlockAccountReason.clockedOut.rawValue)) {
                    try reader.read(at: 0, upToCount: 4)
                }
                #expect(throws: ProtectionError.accountBlocked(identity: alice, reason: BlockAccountReason.clockedOut.rawValue)) {
                    try writer.write(Array("XX".utf8), at: 0)
                }
                #expect(throws: ProtectionError.accountBlocked(identity: alice, reason: BlockAccountReason.clockedOut.rawValue)) {
                    try writer.truncate(to: 0)
                }
            }
        }
        try created.write(Array("bob's".utf8), at: 0)
        f.manager.unblockAccount(alice)
        try writer.write(Array("AB".utf8), at: 0)
        #expect(try reader.read(at: 4, upToCount: 2) == Array("45".utf8))
        #expect(try writer.read(at: 0, upToCount: 10) == Array("AB23456789".utf8))
        // The opener blocked: its handle on another account's data stops too (bob reads alice's data in contoso).
        let bobsReader = try IdentityContext.withThreadIdentity(bob) { try f.files.openProtectedFile(atPath: path, options: [.read]) }
        defer { try? bobsReader.close() }
        #expect(try bobsReader.read(at: 0, upToCount: 2) == Array("AB".utf8))
        f.manager.blockAccount(bob, reason: .clockedOut)
        #expect(throws: ProtectionError.accessDenied(identity: alice, reader: bob)) { try bobsReader.read(at: 0, upToCount: 2) }
        #expect(throws: ProtectionError.accountBlocked(identity: bob, reason: BlockAccountReason.clockedOut.rawValue)) {
            try created.write(Array("more".utf8), at: 5)
        }
        #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) } == Data("AB23456789".utf8))
    }

    @Test("randomized isolation: 64 accounts in 8 tenants, threads and tasks, every API; 0 violations, 0 bytes leaked")
    func randomized() async throws {
        var options = IsolationStress.Options()
        options.seed = 20_261_123
        options.operations = 4_000
        let report = try await IsolationStress.run(options)
        #expect(report.passed, "\(report.table)")
        let rows = report.rows.filter { !IsolationStress.API.faultRows.contains($0.api) }
        #expect(rows.allSatisfy { $0.attempts > 0 }, "\(report.table)")
        #expect(rows.filter { ![.protect, .writeFile, .protectStream].contains($0.api) }.allSatisfy { $0.refused > 0 && $0.allowed > 0 },
                "\(report.table)")
        #expect(report.foreignModifications == 0 && report.plaintextAtRest == 0)
    }

    @Test("the randomized check catches a missing gate: without the modify, read or transfer check it fails",
          arguments: [IsolationStress.Fault.noModifyCheck, .noReadCheck, .noTransferCheck])
    func randomizedFaultInjection(fault: IsolationStress.Fault) async throws {
        var options = IsolationStress.Options()
        options.seed = 11
        options.operations = 2_000
        options.fault = fault
        let report = try await IsolationStress.run(options)
        #expect(!report.passed, "\(fault): \(report.table)")
        switch fault {
        case .noModifyCheck: #expect(report.foreignModifications > 0, "\(report.table)")
        case .noReadCheck: #expect(report.leakedBytes > 0, "\(report.table)")
        default: #expect(report.violationCount > 0, "\(report.table)")
        }
    }

    @Test("the randomized check catches a leak: with isolation off it reports violations and leaked bytes")
    func randomizedSelfCheck() async throws {
        var options = IsolationStress.Options()
        options.seed = 7
        options.operations = 1_000
        options.dataIsolation = false
        let report = try await IsolationStress.run(options)
        #expect(!report.passed)
        #expect(report.leakedBytes > 0)
    }
}

@Suite("Wipes that leave nothing: writers racing the wipe, tenants, crashes, symbolic links (article ServiceBoundary)", .exclusiveProcessIdentity)
struct WipeIsolationTests {
    @Test("8 writers keep creating files as the account being wiped: afterwards none of its files remain, others are byte-identical")
    func wipeRace() async throws {
        let f = try IsolationFixture()
        var others: [String: Data] = [:]
        for index in 0..<40 {
            let owner = [bob, carol, dave, nil][index % 4]
            let path = try f.write("other-\(index).txt", as: owner, "other \(index)")
            others[path] = FileManager.default.contents(atPath: path)
        }
        for index in 0..<50 { _ = try f.write("alice-\(index).txt", as: alice, "alice \(index)") }
        let stop = LockedValue(false)
        let refused = LockedValue(0)
        let writers = (0..<8).map { writer in
            Thread {
                var index = 0
                while !stop.withLock({ $0 }) {
                    index += 1
                    do {
                        _ = try f.write("race-\(writer)-\(index).txt", as: alice, "racing \(index)")
                    } catch {
                        refused.withLock { $0 += 1 }
                        if case .accountBlocked = error as? ProtectionError {} else { Issue.record("unexpected \(error)") }
                    }
                }
            }
        }
        writers.forEach { $0.start() }
        try await Task.sleep(for: .milliseconds(30))
        let report = await f.manager.wipeData(forAccount: alice)
        #expect(report.error == nil)
        try await Task.sleep(for: .milliseconds(30))   // the writers keep trying after the wipe too
        stop.withLock { $0 = true }
        #expect(refused.withLock { $0 } > 0)
        let remaining = try FileManager.default.contentsOfDirectory(atPath: f.root).filter { name in
            (try? f.files.protectionInfo(atPath: f.root + "/" + name)?.owner) == alice
        }
        #expect(remaining.isEmpty, "\(remaining)")
        #expect(try f.files.ownersUnderRoots().contains(alice) == false)
        for (path, bytes) in others { #expect(FileManager.default.contents(atPath: path) == bytes, "\(path)") }
        #expect(f.manager.blockReason(for: alice) == .wiped)
    }

    @Test("wipeData(forTenant:) wipes every account of the tenant, known or only an owner of files; other tenants stay")
    func tenantWipe() async throws {
        let f = try IsolationFixture()
        let stranger: Identity = "zoe@contoso.com"   // never registered: found as an owner of files
        f.manager.registerAccount(bob)
        for (index, owner) in [alice, bob, stranger, carol, dave].enumerated() {
            _ = try f.write("f\(index).txt", as: owner, "data of \(owner.name)")
        }
        let report = await f.manager.wipeData(forTenant: "contoso.com")
        #expect(report.accounts.map(\.account) == [alice, bob, stranger])
        #expect(report.accounts.allSatisfy { $0.removedFiles.count == 1 && $0.error == nil })
        let owners = try f.files.ownersUnderRoots()
        #expect(owners == [carol, dave])
        #expect(f.manager.blockedAccounts.contains(alice) && f.manager.blockReason(for: stranger) == .wiped)
    }

    @Test("symbolic links inside a root pointing outside (file and directory) survive a wipe, and so do their targets")
    func symlinks() async throws {
        let f = try IsolationFixture()
        let outside = f.directory.file("outside")
        try FileManager.default.createDirectory(atPath: outside + "/dir", withIntermediateDirectories: true)
        let keys = f.files
        let target = outside + "/secret.txt"
        try IdentityContext.withThreadIdentity(alice) {
            try keys.writeFile(atPath: target, contents: Data("outside file".utf8))
            try keys.writeFile(atPath: outside + "/dir/inner.txt", contents: Data("outside dir".utf8))
        }
        try FileManager.default.createSymbolicLink(atPath: f.root + "/link-to-file", withDestinationPath: target)
        try FileManager.default.createSymbolicLink(atPath: f.root + "/link-to-dir", withDestinationPath: outside + "/dir")
        _ = try f.write("inside.txt", as: alice, "inside")
        let report = await f.manager.wipeData(forAccount: alice)
        #expect(report.removedFiles == [f.root + "/inside.txt"])
        #expect(FileManager.default.fileExists(atPath: target))
        #expect(FileManager.default.fileExists(atPath: outside + "/dir/inner.txt"))
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: f.root + "/link-to-file")) == target)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: f.root + "/link-to-dir")) == outside + "/dir")
    }

    @Test("a wipe cut short by SIGKILL is finished by the next start: all of the account's files or none, never some",
          .timeLimit(.minutes(10)))
    func crashDuringWipe() throws {
        guard let harness = HarnessChild.executable else { throw HarnessChild.Missing() }
        let victim: Identity = "victim@contoso.com"
        var resumed = 0
        let rounds = ProcessInfo.processInfo.environment["IDENTITY_LONG_TESTS"] == "1" ? 100 : 12
        for round in 0..<rounds {
            let directory = try TemporaryDirectory()
            let (root, state, keysPath) = (directory.file("root"), directory.file("state"), directory.file("keys"))
            try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
            let policy = StaticManagedIdentityPolicy(managed: [victim, alice])
            let files = try FileProtectionManager(roots: [root], keyStore: FileKeyStore(atPath: keysPath), policy: policy, stateDirectory: state)
            for index in 0..<150 {
                let owner = index % 3 == 0 ? alice : victim
                try IdentityContext.withThreadIdentity(owner) {
                    try files.writeFile(atPath: "\(root)/\(["", "a/", "a/b/"][index % 3])f\(index).txt", contents: Data("\(index)".utf8))
                }
            }
            let child = Process()
            child.executableURL = harness
            child.arguments = ["wipe-child", state, root, keysPath, victim.name]
            let pipe = Pipe()
            child.standardOutput = pipe
            try child.run()
            var seen = Data()
            while !String(decoding: seen, as: UTF8.self).contains("ready") {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen.append(chunk)
            }
            usleep(useconds_t((round * 2_311) % 20_000))
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            let journal = FileManager.default.fileExists(atPath: state + "/wipes.journal")
            let restarted = try FileProtectionManager(roots: [root], keyStore: FileKeyStore(atPath: keysPath), policy: policy, stateDirectory: state)
            let owners = try restarted.ownersUnderRoots()
            let victimFiles = try countFiles(owned: victim, under: root, files: restarted)
            if journal {
                resumed += 1
                #expect(victimFiles == 0, "round \(round): \(victimFiles) files of the victim after the restart")
            } else {
                #expect(victimFiles == 0 || victimFiles == 100, "round \(round): \(victimFiles) of 100")
            }
            #expect(owners.contains(alice))
            #expect(try countFiles(owned: alice, under: root, files: restarted) == 50, "round \(round)")
            #expect(!FileManager.default.fileExists(atPath: state + "/wipes.journal"))
        }
        #expect(resumed > 0, "no round killed the child during its wipe")
    }

    private func countFiles(owned owner: Identity, under root: String, files: FileProtectionManager) throws -> Int {
        var count = 0
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let name = enumerator?.nextObject() as? String {
            let path = root + "/" + name
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            if try files.protectionInfo(atPath: path)?.owner == owner { count += 1 }
        }
        return count
    }
}

/// The `identity-harness` executable built next to the test bundle.
enum HarnessChild {
    static var executable: URL? {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [directory, directory.deletingLastPathComponent()].map { $0.appendingPathComponent("identity-harness") }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    struct Missing: Error, CustomStringConvertible {
        var description: String { "identity-harness was not built next to the test bundle" }
    }
}
