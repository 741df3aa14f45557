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
            let sealed = try data.protect(Data("alice's".utf8), identity: alice)
            #expect(try IdentityContext.withThreadIdentity(alice) { try data.unprotect(sealed) } == Data("alice's".utf8), "\(name)")
            #expect(try IdentityContext.withThreadIdentity("ALICE@contoso.com") { try data.unprotect(sealed) } == Data("alice's".utf8))
            for reader in Self.strangers {
                #expect(throws: ProtectionError.accessDenied(identity: alice, reader: reader), "\(name), \(String(describing: reader))") {
                    try IdentityContext.withThreadIdentity(reader) { try data.unprotect(sealed) }
                }
            }
            // An unmanaged account's data is everyone's.
            let open = try data.protect(Data("carol's".utf8), identity: carol)
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
                    #expect(throws: ProtectionError.self) { try files.decryptFile(path: path, toCopyPath: path + ".copy") }
                }
                #expect(!FileManager.default.fileExists(atPath: path + ".copy"))
            }
            // Re-owning it to another account is a transfer: refused even to its owner's code.
            #expect(throws: ProtectionError.accessDenied(identity: alice, reader: bob)) {
                try IdentityContext.withThreadIdentity(alice) { try files.protect(path: path, identity: bob) }
            }
            #expect(try files.protectionInfo(path: path)?.owner == alice)
        }
    }

    @Test("dataIsolation: false is the explicit opt-out: everyone reads every account's data")
    func optOut() throws {
        let f = try Fixture()
        let policy = StaticManagedIdentityPolicy(managed: [alice, bob], dataIsolation: false)
        #expect(!policy.dataIsolation)
        let data = DataProtectionManager(keyStore: f.keys, policy: policy)
        let sealed = try data.protect(Data("alice's".utf8), identity: alice)
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
