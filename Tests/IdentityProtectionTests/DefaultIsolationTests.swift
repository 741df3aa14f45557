import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// A policy that implements only what it must: its access check is the protocol's default.
struct MinimalPolicy: ManagedIdentityPolicy {
    let managed: Set<Identity>
    func isManaged(_ identity: Identity) -> Bool { managed.contains(identity) }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { true }
}

/// Isolation is the default of every policy that ships, and of the protocol itself: a policy has to say so to
/// share a managed account's data, never to protect it.
@Suite("Default isolation: StaticManagedIdentityPolicy and the protocol's default refusal")
struct DefaultIsolationTests {
    /// Every reader that is not the owner: another managed account, an unmanaged one, "" and no identity.
    static let strangers: [Identity?] = [bob, carol, .unmanaged, nil]

    static func policies() -> [(String, any ManagedIdentityPolicy)] {
        [("StaticManagedIdentityPolicy", StaticManagedIdentityPolicy(managed: [alice, bob])),
         ("the protocol's default", MinimalPolicy(managed: [alice, bob]))]
    }

    @Test("a managed account's envelope: its owner reads it, nobody else does (108, no plaintext)")
    func envelopes() throws {
        let f = try Fixture()
        for (name, policy) in Self.policies() {
            let data = DataProtectionManager(keyStore: f.keys, policy: policy)
            let sealed = try data.protect(Data("alice's".utf8), owner: alice)
            #expect(try IdentityContext.withThreadIdentity(alice) { try data.unprotect(sealed) } == Data("alice's".utf8), "\(name)")
            #expect(try IdentityContext.withThreadIdentity("ALICE@contoso.com") { try data.unprotect(sealed) } == Data("alice's".utf8))
            for reader in Self.strangers {
                #expect(throws: ProtectionError.accessDenied(identity: alice, reader: reader), "\(name), \(String(describing: reader))") {
                    try IdentityContext.withThreadIdentity(reader) { try data.unprotect(sealed) }
                }
            }
            // An unmanaged account's data is everyone's.
            let open = try data.protect(Data("carol's".utf8), owner: carol)
            for reader in [alice, bob, carol, .unmanaged, nil] as [Identity?] {
                #expect(try IdentityContext.withThreadIdentity(reader) { try data.unprotect(open) } == Data("carol's".utf8))
            }
        }
    }

    @Test("a managed account's file: read, copied out, opened or re-owned only by its owner")
    func files() throws {
        let f = try Fixture()
        for (index, (name, policy)) in Self.policies().enumerated() {
            let files = try FileProtectionManager(
                roots: [f.root], keyStore: f.keys, policy: policy, stateDirectory: f.directory + "/state-\(index)")
            let path = f.path("alice-\(index).txt")
            try IdentityContext.withThreadIdentity(alice) { try files.writeFile(atPath: path, contents: Data("alice's file".utf8)) }
            #expect(try IdentityContext.withThreadIdentity(alice) { try files.readFile(atPath: path) } == Data("alice's file".utf8))
            for reader in Self.strangers {
                IdentityContext.withThreadIdentity(reader) {
                    #expect(throws: ProtectionError.self, "\(name) readFile by \(String(describing: reader))") { try files.readFile(atPath: path) }
                    #expect(throws: ProtectionError.self) { try files.openProtectedFile(atPath: path, options: [.read]) }
                    #expect(throws: ProtectionError.self) { try files.decryptFile(atPath: path, toPath: path + ".copy") }
                }
                #expect(!FileManager.default.fileExists(atPath: path + ".copy"))
            }
            // Re-owning it to another account is a transfer: refused even to its owner's code.
            #expect(throws: ProtectionError.accessDenied(identity: alice, reader: bob)) {
                try IdentityContext.withThreadIdentity(alice) { try files.protect(atPath: path, owner: bob) }
            }
            #expect(try files.protectionInfo(atPath: path)?.owner == alice)
        }
    }

    @Test("dataIsolation: false is the explicit opt-out: everyone reads every account's data")
    func optOut() throws {
        let f = try Fixture()
        let policy = StaticManagedIdentityPolicy(managed: [alice, bob], dataIsolation: false)
        #expect(!policy.dataIsolation)
        let data = DataProtectionManager(keyStore: f.keys, policy: policy)
        let sealed = try data.protect(Data("alice's".utf8), owner: alice)
        for reader in Self.strangers {
            #expect(try IdentityContext.withThreadIdentity(reader) { try data.unprotect(sealed) } == Data("alice's".utf8))
        }
        // Switched back on, at any time.
        policy.dataIsolation = true
        #expect(throws: ProtectionError.accessDenied(identity: alice, reader: nil)) { try data.unprotect(sealed) }
    }

    @Test("the default refusal allows creating data for any account, and refuses nothing about unmanaged ones")
    func createAndUnmanaged() {
        let policy = MinimalPolicy(managed: [alice])
        #expect(policy.refusal(of: .create, to: alice) == nil)
        #expect(policy.refusal(of: .read(reader: alice), to: alice) == nil)
        #expect(policy.refusal(of: .read(reader: nil), to: alice) == .accessDenied(identity: alice, reader: nil))
        #expect(policy.refusal(of: .transfer(to: bob), to: alice) == .accessDenied(identity: alice, reader: bob))
        #expect(policy.refusal(of: .transfer(to: alice), to: alice) == nil)
        #expect(policy.refusal(of: .read(reader: nil), to: carol) == nil)
        #expect(policy.refusal(of: .transfer(to: nil), to: carol) == nil)
    }
}

/// Modifying existing data is an operation of its own: whoever may not read an account's data may not write
/// into it, truncate it, replace it or re-encrypt it, whatever owner the call names for the result.
@Suite("Modify: nobody who may not read an account's data may change it")
struct ModifyTests {
    /// alice's file, encrypted, and its bytes on disk.
    private func alicesFile(_ f: Fixture, _ name: String) throws -> (path: String, bytes: Data) {
        let path = f.path(name)
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("alice's numbers".utf8)) }
        return (path, try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test("as another account, \"\" or no identity: every way of changing alice's file is refused (108) and changes nothing")
    func refused() throws {
        let f = try Fixture(isolated: true)
        for (index, stranger) in ([bob, carol, .unmanaged, nil] as [Identity?]).enumerated() {
            let (path, before) = try alicesFile(f, "numbers-\(index).txt")
            let attempts: [(String, () throws -> Void)] = [
                ("ProtectedFile .read .write .truncate, owner alice", {
                    _ = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: alice)
                }),
                ("ProtectedFile .write", { _ = try f.files.openProtectedFile(atPath: path, options: [.write]) }),
                ("ProtectedFile .write .create", { _ = try f.files.openProtectedFile(atPath: path, options: [.write, .create]) }),
                ("openFile .write .truncate", { _ = try f.files.openFile(atPath: path, options: [.write, .truncate]) }),
                ("openFile .write .append", { _ = try f.files.openFile(atPath: path, options: [.write, .append]) }),
                ("writeFile", { try f.files.writeFile(atPath: path, contents: Data("overwritten".utf8)) }),
                ("protect(atPath:owner: alice)", { try f.files.protect(atPath: path, owner: alice) }),
                ("encryptFile(atPath:owner: alice)", { try f.files.encryptFile(atPath: path, owner: alice) }),
            ]
            for (name, attempt) in attempts {
                IdentityContext.withThreadIdentity(stranger) {
                    do {
                        try attempt()
                        Issue.record("\(name) as \(String(describing: stranger)) was allowed")
                    } catch let error as ProtectionError {
                        #expect(error.code == 108, "\(name) as \(String(describing: stranger)): \(error)")
                    } catch {
                        Issue.record("\(name): \(error)")
                    }
                }
                #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(name) as \(String(describing: stranger)) changed the file")
            }
            #expect(try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: path) } == Data("alice's numbers".utf8))
        }
    }

    @Test("alice herself may change her file every way")
    func ownerMay() throws {
        let f = try Fixture(isolated: true)
        let (path, _) = try alicesFile(f, "mine.txt")
        try IdentityContext.withThreadIdentity(alice) {
            let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: alice)
            try file.write(Array("rewritten".utf8))
            try file.close()
            #expect(try f.files.readFile(atPath: path) == Data("rewritten".utf8))
            try f.files.writeFile(atPath: path, contents: Data("again".utf8))
            try f.files.encryptFile(atPath: path, owner: alice)
            #expect(try f.files.readFile(atPath: path) == Data("again".utf8))
        }
    }
}

@Suite("Directory owners: re-owning another account's directory is a modification and a transfer")
struct DirectoryOwnerAccessTests {
    @Test("as another account, \"\" or no identity: alice's directory keeps its owner; alice may change it")
    func reowningDirectories() throws {
        let f = try Fixture(isolated: true)
        let directory = f.path("alice-dir")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try IdentityContext.withThreadIdentity(alice) { try f.files.protectDirectory(atPath: directory) }
        for stranger in [bob, carol, .unmanaged, nil] as [Identity?] {
            IdentityContext.withThreadIdentity(stranger) {
                #expect(throws: ProtectionError.self) { try f.files.protectDirectory(atPath: directory, owner: stranger ?? carol) }
                #expect(throws: ProtectionError.self) { try f.files.protectDirectory(atPath: directory, owner: alice) }
            }
            #expect(try f.files.ownerOfDirectory(atPath: directory) == alice)
        }
        // Alice re-owning her own directory to another managed account is a transfer: isolation refuses it.
        #expect(throws: ProtectionError.accessDenied(identity: alice, reader: bob)) {
            try IdentityContext.withThreadIdentity(alice) { try f.files.protectDirectory(atPath: directory, owner: bob) }
        }
        // To herself again: allowed.
        try IdentityContext.withThreadIdentity(alice) { try f.files.protectDirectory(atPath: directory, owner: alice) }
        #expect(try f.files.ownerOfDirectory(atPath: directory) == alice)
    }
}
