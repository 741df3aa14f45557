import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing
/// Holes an adversarial review of the gate found (PolicyManager), each asserted closed.
@Suite("Review regressions: handles, copies of envelopes, unloaded sources, wipes")
struct ReviewRegressionTests {
    private func code(_ body: () throws -> Void) -> Int? {
        do { try body(); return nil } catch let error as ProtectionError { return error.code } catch { return -1 }
    }

    @Test("bob (contoso) may not open a file he creates for carol (fabrikam): the handle would read what she writes")
    func createHandleCrossTenant() throws {
        let f = try IsolationFixture()
        let path = f.root + "/for-carol"
        for options in [[.read, .write, .create], [.write, .create], [.read, .create]] as [FileOpenOptions] {
            #expect(code {
                _ = try IdentityContext.withThreadIdentity(bob) { try f.files.openProtectedFile(atPath: path, options: options, owner: carol) }
            } == 108)
            #expect(!FileManager.default.fileExists(atPath: path))
        }
        // One-shot creation for carol stays possible (as an envelope for her is): nothing is left open on it.
        try IdentityContext.withThreadIdentity(carol) { try f.files.writeFile(atPath: path, contents: Data("CAROL-SECRET".utf8)) }
        #expect(code { _ = try IdentityContext.withThreadIdentity(bob) { try f.files.readFile(atPath: path) } } == 108)
    }

    @Test("a handle bob opened on a file he created for alice stops reading and writing when bob is blocked")
    func createHandleAfterOpenerBlocked() throws {
        let f = try IsolationFixture()
        let path = f.root + "/for-alice"
        let handle = try IdentityContext.withThreadIdentity(bob) {
            try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: alice)
        }
        defer { try? handle.close() }
        try handle.write(Array("hello".utf8))
        f.manager.blockAccount(bob, reason: .blockedByAdministrator)
        defer { f.manager.unblockAccount(bob) }
        let wroteAfterBlock = IdentityContext.withThreadIdentity(bob) { (try? handle.write(Array("more".utf8))) != nil }
        #expect(!wroteAfterBlock, "blocked bob still writes through his handle")
        let readAfterBlock = IdentityContext.withThreadIdentity(bob) { (try? handle.read(at: 0, upToCount: 16)) != nil }
        #expect(!readAfterBlock, "blocked bob still reads through his handle")
        // Direct access for blocked bob is refused:
        #expect(code { _ = try IdentityContext.withThreadIdentity(bob) { try f.files.readFile(atPath: path) } } == 108)
    }

    @Test("a read/write handle stops when its opener or its owner is blocked, and works again after the unblock")
    func readHandleBlockedOpener() throws {
        let f = try IsolationFixture()
        let path = try f.write("alice.txt", as: alice, "alice data")
        let handle = try IdentityContext.withThreadIdentity(bob) { try f.files.openProtectedFile(atPath: path, options: [.read, .write]) }
        defer { try? handle.close() }
        f.manager.blockAccount(bob, reason: .blockedByAdministrator)
        #expect(code { _ = try handle.read(at: 0, upToCount: 4) } != nil)
        #expect(code { try handle.write(Array("x".utf8), at: 0) } != nil)
        #expect(code { try handle.truncate(to: 0) } != nil)
        f.manager.unblockAccount(bob)
        f.manager.blockAccount(alice, reason: .blockedByAdministrator)
        #expect(code { _ = try handle.read(at: 0, upToCount: 4) } == 109)
        f.manager.unblockAccount(alice)
        #expect(code { _ = try handle.read(at: 0, upToCount: 4) } == nil)
    }

    @Test("unprotect(atPath:) of carol's file holding a clear envelope that names dave: the copy stays carol's, alice (contoso) reads nothing")
    func unprotectLaundersAcrossTenants() throws {
        let f = try IsolationFixture()
        let src = f.root + "/plain"
        try Data("CAROL-SECRET".utf8).write(to: URL(fileURLWithPath: src))
        let env = f.root + "/env"
        try IdentityContext.withThreadIdentity(nil) { try f.files.protect(atPath: src, toPath: env, owner: dave) }
        let envelope = try Data(contentsOf: URL(fileURLWithPath: env))
        // carol (fabrikam: files not encrypted) stores the clear envelope bytes as her own data.
        let carolPath = f.root + "/carol.idps"
        try IdentityContext.withThreadIdentity(carol) { try f.files.writeFile(atPath: carolPath, contents: envelope) }
        #expect(try f.files.protectionInfo(atPath: carolPath)?.owner == carol)
        // alice (contoso) may not read it; carol may not give it to dave either:
        #expect(code { _ = try IdentityContext.withThreadIdentity(alice) { try f.files.readFile(atPath: carolPath) } } == 108)
        #expect(code { try IdentityContext.withThreadIdentity(carol) { try f.files.protect(atPath: carolPath, owner: dave) } } == 108)
        #expect(code { try IdentityContext.withThreadIdentity(erin) {
            try f.files.protect(atPath: carolPath, toPath: f.root + "/x", owner: dave) } } == 108)
        // erin unprotects it: the copy's owner is whatever the (unauthenticated) clear envelope names.
        let copy = f.root + "/copy"
        let refusal = code { try IdentityContext.withThreadIdentity(erin) { try f.files.unprotect(atPath: carolPath, toPath: copy) } }
        if refusal == nil {
            let owner = try f.files.protectionInfo(atPath: copy)?.owner
            #expect(owner == carol, "the copy of carol's data is owned by \(String(describing: owner)) (no transfer was asked)")
            let leaked = IdentityContext.withThreadIdentity(alice) { try? f.files.readFile(atPath: copy) }
            #expect(leaked == nil, "alice (contoso) read carol's data: \(String(decoding: leaked ?? Data(), as: UTF8.self))")
        }
    }

    @Test("before the policy source loads, the file-to-file streams and removeFiles refuse with 115 and write nothing")
    func unloadedSource() throws {
        let source = LatePolicySource()
        let f = try UnavailableFixture(source: source)
        let root = f.directory.file("root")
        let src = root + "/unowned"
        try Data("x".utf8).write(to: URL(fileURLWithPath: src))
        for caller in [alice, bob, dave] as [Identity?] {
            IdentityContext.withThreadIdentity(caller) {
                let out = root + "/out-\(UUID().uuidString)"
                #expect(f.code { try f.files.protect(atPath: src, toPath: out) } == 115, "\(String(describing: caller))")
                #expect(!FileManager.default.fileExists(atPath: out))
                #expect(f.code { try f.files.protect(atPath: src, toPath: out, owner: alice) } == 115)
                #expect(f.code { _ = try f.files.removeFiles(ownedBy: alice) } == 115)
                #expect(f.code { _ = try f.files.removeFiles(ownedBy: dave) } == 115)
                #expect(f.code { _ = try f.files.removeFiles(ownedByAnyOf: [alice, dave]) } == 115)
                #expect(f.code { _ = try f.files.openProtectedFile(atPath: out, options: [.read, .write, .create]) } == 115)
                #expect(!FileManager.default.fileExists(atPath: out))
            }
        }
        // No identity, identity nil: unowned data stays allowed (the docs' rule); but an explicit account is 115.
        IdentityContext.withThreadIdentity(nil) {
            #expect(f.code { try f.files.protect(atPath: src, toPath: root + "/o2", owner: carol) } == 115)
        }
    }

    @Test("removeFiles(ownedByAnyOf:) of own and other tenants' accounts deletes nothing; a blocked caller is refused")
    func removeMixed() throws {
        let f = try IsolationFixture()
        let a = try f.write("a", as: alice, "A")
        let c = try f.write("c", as: carol, "C")
        IdentityContext.withThreadIdentity(alice) {
            #expect(code { _ = try f.files.removeFiles(ownedByAnyOf: [alice, carol]) } == 108)
        }
        IdentityContext.withThreadIdentity(nil) {
            #expect(code { _ = try f.files.removeFiles(ownedBy: alice) } == 108)
        }
        #expect(FileManager.default.fileExists(atPath: a))
        #expect(FileManager.default.fileExists(atPath: c))
        f.manager.blockAccount(bob, reason: .blockedByAdministrator)
        IdentityContext.withThreadIdentity(bob) {
            #expect(code { _ = try f.files.removeFiles(ownedBy: dave) } != nil, "a blocked caller removed an unmanaged account's files")
        }
    }
}

@Suite("Review regressions: a symbolic link names the file it points to")
struct LinkTargetRegressionTests {
    private func code(_ body: () throws -> Void) -> Int? {
        do { try body(); return nil } catch let error as ProtectionError { return error.code } catch { return -1 }
    }

    @Test("writing through a link writes its target: the checks, the owner record and the content are the target's (index storage)",
          arguments: ["protect(atPath:)", "unprotect(atPath:)", "writeFile"])
    func writingThroughALink(api: String) throws {
        let f = try IsolationFixture()
        let files = try FileProtectionManager(roots: [f.root], keyStore: f.keys, policy: f.manager,
                                              stateDirectory: f.directory.file("state2"), ownerStorage: .indexOnly)
        let carols = f.root + "/carol.txt"
        try IdentityContext.withThreadIdentity(carol) { try files.writeFile(atPath: carols, contents: Data("CAROL-SECRET".utf8)) }
        let link = f.root + "/link"
        #expect(symlink(carols, link) == 0)
        let plain = f.root + "/plain"
        try Data("ERIN".utf8).write(to: URL(fileURLWithPath: plain))
        func write(as caller: Identity) throws {
            try IdentityContext.withThreadIdentity(caller) {
                switch api {
                case "protect(atPath:)": try files.protect(atPath: plain, toPath: link, owner: caller)
                case "unprotect(atPath:)":
                    try files.protect(atPath: plain, toPath: f.root + "/\(caller.name).idps", owner: caller)
                    try files.unprotect(atPath: f.root + "/\(caller.name).idps", toPath: link)
                default: try files.writeFile(atPath: link, contents: Data("ERIN".utf8))
                }
            }
        }
        // alice (contoso) may not modify carol's data: refused, and carol's file is as it was, hers.
        #expect(code { try write(as: alice) } == 108)
        #expect(FileManager.default.contents(atPath: carols) == Data("CAROL-SECRET".utf8))
        #expect(try files.protectionInfo(atPath: carols)?.owner == carol)
        // erin (fabrikam) may: the write goes to carol's file, which becomes erin's; the link stays a link.
        try write(as: erin)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == carols)
        #expect(try files.protectionInfo(atPath: carols)?.owner == erin)
        #expect(FileManager.default.contents(atPath: carols) != Data("CAROL-SECRET".utf8))
        // carol's index entry went with her file; erin's is the one recorded (no unowned file left behind).
        #expect(try files.ownersUnderRoots().contains(carol) == false)
    }
}
