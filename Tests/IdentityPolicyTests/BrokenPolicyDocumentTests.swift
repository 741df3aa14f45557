import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

/// A directory of policy documents read by a `DirectoryPolicySource`, and the managers of `UnavailableFixture`
/// over it.
private struct BrokenDocumentFixture {
    let policies: TemporaryDirectory
    let source: DirectoryPolicySource
    let f: UnavailableFixture

    /// fabrikam.com's tenant document is good (encryption required) unless `documents` replaces it.
    init(_ documents: [String: String]) throws {
        policies = try TemporaryDirectory()
        var all = ["fabrikam.json": #"{"formatVersion": 1, "tenant": "fabrikam.com", "fileEncryptionRequired": true}"#]
        all.merge(documents) { $1 }
        for (name, text) in all { try policies.write(name, text) }
        source = try DirectoryPolicySource(directory: policies.path)
        f = try UnavailableFixture(source: source)
    }

    func write(_ name: String, _ text: String) throws {
        try policies.write(name, text)
        source.reload()
    }

    func remove(_ name: String) throws {
        try FileManager.default.removeItem(atPath: policies.file(name))
        source.reload()
    }

    /// The ProtectionError code of protecting data for `owner` (nil: protected).
    func protectCode(_ owner: Identity) -> Int? {
        f.code { _ = try f.data.protect(Data("x".utf8), owner: owner) }
    }

    /// The code of `owner` writing a file of its own under the root; the file must not exist after a refusal.
    func writeCode(_ owner: Identity, _ name: String) -> Int? {
        let path = f.directory.file("root/\(name)")
        let code = IdentityContext.withThreadIdentity(owner) {
            f.code { try f.files.writeFile(atPath: path, contents: Data("secret of \(owner.name)".utf8)) }
        }
        if code != nil { #expect(!FileManager.default.fileExists(atPath: path), "a refused write left \(path)") }
        return code
    }
}

@Suite("A policy document that cannot be read is a refusal, never an unmanaged account")
struct BrokenPolicyDocumentTests {
    @Test("contoso's tenant document with \"fileEncryptionRequired\": \"yes\": alice's data is refused with 115 and never written in the clear; fabrikam reads nothing of hers")
    func wrongTypeInTenantDocumentRefusesTheTenant() async throws {
        // alice wrote a file while contoso had no document (unmanaged then: in the clear, which is allowed).
        let x = try BrokenDocumentFixture([:])
        let old = x.f.directory.file("root/old.txt")
        try IdentityContext.withThreadIdentity(alice) { try x.f.files.writeFile(atPath: old, contents: Data("alice's".utf8)) }

        try x.write("contoso.json", """
            {
              "formatVersion": 1,
              "tenant": "contoso.com",
              "fileEncryptionRequired": "yes"
            }
            """)
        #expect(x.protectCode(alice) == 115)
        #expect(x.writeCode(alice, "new.txt") == 115)
        // The fabrikam account reads nothing of alice's, and neither does alice until the document is fixed.
        for reader in [carol, alice, dave, nil] as [Identity?] {
            let code = IdentityContext.withThreadIdentity(reader) { x.f.code { _ = try x.f.files.readFile(atPath: old) } }
            #expect(code == 115, "\(String(describing: reader))")
        }
        #expect(!x.f.manager.isDataTransferAllowed(from: alice, to: carol))
        #expect(!x.f.manager.isDataTransferAllowed(from: carol, to: alice))
        #expect(!x.f.manager.isDataTransferAllowed(from: alice, to: alice))
        #expect(x.f.manager.isFileEncryptionRequired(for: alice))
        #expect(x.f.manager.isIdentityManaged(alice))
        #expect(x.f.manager.policy(for: alice) == .locked(for: alice))
        // Admission and switches refuse, as before the first load.
        do {
            try await x.f.manager.withAdmittedIdentity(bob) {}
            Issue.record("bob@contoso.com was admitted under an unreadable tenant document")
        } catch {
            let refusal = try #require(error as? AdmissionError)
            #expect(refusal.result == .failed)
            guard case .unavailable = refusal.cause else { Issue.record("cause \(refusal.cause)"); return }
        }
        #expect(await switchUI(x.f.manager, alice) == .notAllowed)
        // fabrikam and accounts of tenants without a document are decided as usual.
        #expect(x.protectCode(carol) == nil)
        #expect(x.protectCode(dave) == nil)
        #expect(try x.f.data.protectionInfo(try x.f.data.protect(Data("x".utf8), owner: carol))?.isEncrypted == true)

        // The error names the file, the position of the value and the key.
        let error = try #require(x.f.manager.policyErrors.first)
        #expect(x.f.manager.policyErrors.count == 1)
        #expect(error.key == "fileEncryptionRequired")
        #expect(error.position?.line == 4)
        #expect(error.position?.column == 29)
        #expect(error.description.hasPrefix(x.policies.file("contoso.json") + ":4:29: \"fileEncryptionRequired\": must be a boolean"))
    }

    /// Documents that do not parse but still name their subject, alice's own or contoso's.
    static let brokenWithSubject: [(String, String)] = [
        ("bad JSON after the account", #"{"formatVersion": 1, "account": "alice@contoso.com", "pinRequired": tru}"#),
        ("truncated after the tenant", #"{"formatVersion": 1, "tenant": "contoso.com", "pinRe"#),
        ("unknown key", #"{"formatVersion": 1, "account": "alice@contoso.com", "fileEncryption": true}"#),
        ("missing formatVersion", #"{"account": "alice@contoso.com"}"#),
        ("unsupported version", #"{"formatVersion": 2, "tenant": "contoso.com"}"#),
        ("invalid value", #"{"formatVersion": 1, "account": "alice@contoso.com", "dataTransfer": "everyone"}"#),
        ("wrong type", #"{"formatVersion": 1, "tenant": "contoso.com", "saveToLocations": "all"}"#),
        ("key written twice", #"{"formatVersion": 1, "account": "alice@contoso.com", "pinRequired": true, "pinRequired": false}"#),
    ]

    @Test("a document that does not parse from the start leaves the account or tenant it names refusing (115); others are decided", arguments: brokenWithSubject)
    func brokenFromStartWithSubject(kind: String, text: String) async throws {
        let x = try BrokenDocumentFixture(["broken.json": text])
        #expect(x.protectCode(alice) == 115, "\(kind)")
        #expect(x.writeCode(alice, "a.txt") == 115, "\(kind)")
        #expect(x.protectCode(carol) == nil, "\(kind)")
        #expect(x.protectCode(dave) == nil, "\(kind)")
        await #expect(throws: AdmissionError.self) { try await x.f.manager.withAdmittedIdentity(alice) {} }
        #expect(x.source.errors.count == 1, "\(kind)")
        #expect(x.f.manager.policyErrors == x.source.errors, "\(kind)")
        #expect(x.f.manager.policyErrors.first?.position != nil, "\(kind)")
    }

    /// Documents whose subject cannot be read.
    static let brokenWithoutSubject: [(String, String)] = [
        ("not JSON", "{ not json"),
        ("bad JSON before the account", #"{"formatVersion": 1 "account": "alice@contoso.com"}"#),
        ("account of the wrong type", #"{"formatVersion": 1, "account": 42}"#),
        ("account that is no name", #"{"formatVersion": 1, "account": ""}"#),
        ("tenant that is an account", #"{"formatVersion": 1, "tenant": "alice@contoso.com"}"#),
        ("no subject", #"{"formatVersion": 1}"#),
        ("not an object", "[1]"),
        ("empty file", ""),
    ]

    @Test("a document whose subject cannot be read: every account without a good document of its own refuses (115)", arguments: brokenWithoutSubject)
    func brokenWithoutSubjectRefusesEveryoneWithoutOwnDocument(kind: String, text: String) async throws {
        let x = try BrokenDocumentFixture([
            "broken.json": text, "bob.json": #"{"formatVersion": 1, "account": "bob@contoso.com"}"#,
        ])
        for account in [alice, carol, dave] {
            #expect(x.protectCode(account) == 115, "\(kind): \(account)")
            await #expect(throws: AdmissionError.self, "\(kind): \(account)") { try await x.f.manager.withAdmittedIdentity(account) {} }
        }
        #expect(x.writeCode(dave, "d.txt") == 115, "\(kind)")
        // bob's own good document decides for him.
        #expect(x.protectCode(bob) == nil, "\(kind)")
        // Unowned data needs no decision.
        #expect(x.protectCode(.unmanaged) == nil, "\(kind)")
        #expect(!x.f.manager.policyErrors.isEmpty, "\(kind)")
    }

    @Test("a broken edit of a good document keeps the last good one in force, and is still reported")
    func brokenEditKeepsLastGood() throws {
        let good = #"{"formatVersion": 1, "account": "alice@contoso.com", "fileEncryptionRequired": true}"#
        let x = try BrokenDocumentFixture(["alice.json": good])
        #expect(x.writeCode(alice, "a.txt") == nil)
        try x.write("alice.json", #"{"formatVersion": 1, "account": "alice@contoso.com", "fileEncryptionRequired": "yes"}"#)
        #expect(x.writeCode(alice, "b.txt") == nil)
        #expect(try x.f.files.isFileEncrypted(atPath: x.f.directory.file("root/b.txt")))
        #expect(x.protectCode(dave) == nil)
        #expect(x.f.manager.policyErrors.map(\.key) == ["fileEncryptionRequired"])
    }

    @Test("a broken edit that names another account: the last good one stays, the other account refuses")
    func brokenEditNamingAnotherAccount() throws {
        let x = try BrokenDocumentFixture(["alice.json": #"{"formatVersion": 1, "account": "alice@contoso.com"}"#])
        try x.write("alice.json", #"{"formatVersion": 1, "account": "dave@gmail.com", "pinRequired": "yes"}"#)
        #expect(x.protectCode(alice) == nil)
        #expect(x.protectCode(dave) == 115)
    }

    @Test("fixing the document applies its policy; removing it ends the refusal")
    func fixedOrRemoved() throws {
        let x = try BrokenDocumentFixture(["contoso.json": #"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": "yes"}"#])
        #expect(x.protectCode(alice) == 115)
        try x.write("contoso.json", #"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": true}"#)
        #expect(x.writeCode(alice, "a.txt") == nil)
        #expect(try x.f.files.isFileEncrypted(atPath: x.f.directory.file("root/a.txt")))
        #expect(x.f.manager.policyErrors.isEmpty)

        try x.write("contoso.json", "{ broken")
        // The last good version stays in force.
        #expect(x.protectCode(alice) == nil)
        try x.remove("contoso.json")
        // Removed: alice is unmanaged again (no document governs her), her data in the clear as for any such account.
        #expect(x.protectCode(alice) == nil)
        #expect(!x.f.manager.isIdentityManaged(alice))
        #expect(x.f.manager.policyErrors.isEmpty)

        try x.write("contoso.json", #"{"formatVersion": 1, "tenant": "contoso.com", "pinRequired": 1}"#)
        #expect(x.protectCode(alice) == 115)
        try x.remove("contoso.json")
        #expect(x.protectCode(alice) == nil)
    }

    @Test("a .json entry that cannot be read counts as a document that does not parse: with no last good version, every account without its own document refuses")
    func unreadableDocument() throws {
        let x = try BrokenDocumentFixture(["bob.json": #"{"formatVersion": 1, "account": "bob@contoso.com"}"#])
        #expect(x.protectCode(dave) == nil)
        // A directory named like a document cannot be read as one (whoever runs the test, root included).
        try FileManager.default.createDirectory(atPath: x.policies.file("alice.json"), withIntermediateDirectories: false)
        x.source.reload()
        #expect(x.protectCode(dave) == 115)
        #expect(x.protectCode(alice) == 115)
        #expect(x.protectCode(bob) == nil)
        guard case .unreadable = x.f.manager.policyErrors.first else {
            Issue.record("unexpected errors \(x.f.manager.policyErrors)")
            return
        }
        try FileManager.default.removeItem(atPath: x.policies.file("alice.json"))
        x.source.reload()
        #expect(x.protectCode(dave) == nil)
    }

    @Test("an errors change is posted as an event and a notification, once per change")
    func errorsArePosted() async throws {
        let x = try BrokenDocumentFixture([:])
        let received = Recorder<[String]>()
        let observer = x.f.manager.notificationCenter.addObserver(forName: .policyErrorsDidChange, object: x.f.manager, queue: nil) { note in
            received.append(note.userInfo?["errors"] as? [String] ?? ["?"])
        }
        defer { x.f.manager.notificationCenter.removeObserver(observer) }
        let events = x.f.manager.events
        try x.write("contoso.json", #"{"formatVersion": 1, "tenant": "contoso.com", "pinRequired": "no"}"#)
        x.source.reload()   // the same error again: nothing new to post
        try x.remove("contoso.json")
        var iterator = events.makeAsyncIterator()
        var posted: [[PolicyDocumentError]] = []
        while posted.count < 2, let event = await iterator.next() {
            if case let .policyErrorsDidChange(errors) = event { posted.append(errors) }
        }
        #expect(posted.count == 2)
        #expect(posted.first?.first?.key == "pinRequired")
        #expect(posted.last == [])
        #expect(received.count == 2)
        #expect(received.all.first?.first?.contains("contoso.json:1:62: \"pinRequired\": must be a boolean") == true)
    }
}

@Suite("PolicySet: broken documents assembled for every source")
struct PolicySetBrokenAssemblyTests {
    @Test("any source's undecided subjects are refused by the manager, and released when they are decided")
    func anySourceSharesTheRule() throws {
        let source = StaticPolicySource()
        let f = try UnavailableFixture(source: source)
        source.setPolicies(PolicySet(tenants: ["fabrikam.com": Policy(identity: nil)], unavailableTenants: ["contoso.com"]))
        #expect(f.code { _ = try f.data.protect(Data("x".utf8), owner: bob) } == 115)
        #expect(f.code { _ = try f.data.protect(Data("x".utf8), owner: carol) } == nil)
        // Giving carol's data to alice (contoso, undecided) creates data for alice: refused the same way.
        #expect(f.manager.refusal(of: .transfer(to: alice), to: carol)?.code == 115)
        source.setPolicies(PolicySet(tenants: ["fabrikam.com": Policy(identity: nil)]))
        #expect(f.code { _ = try f.data.protect(Data("x".utf8), owner: bob) } == nil)
    }

    @Test("a broken document's subjects are undecided, unless its last good version names the same subject")
    func assembly() throws {
        let good = try PolicyDocument(json: Data(#"{"formatVersion": 1, "account": "alice@contoso.com"}"#.utf8), path: "a")
        let (set, _) = PolicySet.assembled(
            from: [(path: "a", document: good)],
            broken: [
                (path: "a", subjects: Set<PolicyDocument.Subject>([.account(alice), .account(dave)])),
                (path: "b", subjects: Set<PolicyDocument.Subject>([.tenant("fabrikam.com")])),
            ])
        #expect(set.isComplete)
        #expect(set.resolution(for: alice) == .policy(Policy(identity: alice)))
        #expect(set.resolution(for: dave) == .undecided)
        #expect(set.resolution(for: carol) == .undecided)
        #expect(set.resolution(for: bob) == .none)
        #expect(set.policy(for: carol) == nil)

        let (incomplete, _) = PolicySet.assembled(from: [(path: "a", document: good)], broken: [(path: "c", subjects: Set<PolicyDocument.Subject>())])
        #expect(!incomplete.isComplete)
        #expect(incomplete.resolution(for: alice) != .undecided)
        #expect(incomplete.resolution(for: bob) == .undecided)
        #expect(incomplete.resolution(for: .unmanaged) == .none)
        // A broken edit whose subject is unknown keeps the last good document, and the set complete.
        #expect(PolicySet.assembled(from: [(path: "a", document: good)], broken: [(path: "a", subjects: Set<PolicyDocument.Subject>())]).policies.isComplete)
    }

    @Test("reading a document salvages its account and tenant when other keys are bad")
    func salvage() {
        let text = #"{"formatVersion": 1, "account": "alice@contoso.com", "pinRequired": "yes"}"#
        guard case let .broken(error, subjects) = PolicyDocument.read(json: Data(text.utf8), path: "p") else {
            Issue.record("read as a document")
            return
        }
        #expect(subjects == [.account(alice)])
        #expect(error.position == PolicyDocumentPosition(offset: 68, line: 1, column: 69))
        #expect(error.description == #"p:1:69: "pinRequired": must be a boolean, found string"#)
    }

    @Test("JSON syntax errors give the position where the reader stopped")
    func syntaxPosition() {
        let text = "{\n  \"formatVersion\": 1,\n  \"account\": \"alice@contoso.com\"\n  \"pinRequired\": true\n}"
        guard case let .broken(error, subjects) = PolicyDocument.read(json: Data(text.utf8), path: "p") else {
            Issue.record("read as a document")
            return
        }
        #expect(subjects == [.account(alice)])
        #expect(error.position?.line == 4)
        #expect(error.position?.column == 3)
        guard case .malformedJSON = error else { Issue.record("\(error)"); return }
    }
}
