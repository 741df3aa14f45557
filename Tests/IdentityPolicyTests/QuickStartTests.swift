// The quick start of the README and of the IdentityPolicy landing page, as written: the lines between the two
// markers are those pages' sample, character for character (scripts/check-doc-samples.sh fails when they differ).
// quick start: begin
// Quick start: a service's policies, key store and both managers, and requests served as their account.
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime

struct DocumentService {
    let policies: PolicyManager
    let files: FileProtectionManager
    let documents: String

    init(directory: String) throws {
        // contoso.com's accounts are managed: their files are encrypted at rest and refused to other tenants.
        // A service usually reads its policies from JSON documents: DirectoryPolicySource(directory:).
        let source = StaticPolicySource(tenants: ["contoso.com": Policy(identity: nil, isFileEncryptionRequired: true)])
        policies = PolicyManager(policySource: source)
        let keys = try FileKeyStore(atPath: directory + "/keys")   // a key ring per managed account, mode 0700
        documents = directory + "/documents"
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: true)
        files = try FileProtectionManager(
            roots: [documents], keyStore: keys, policy: policies,     // the policy manager decides every access
            stateDirectory: directory + "/state")
        policies.fileProtection = files   // wipeData(forAccount:) deletes the account's files and destroys its keys
    }

    // Request handlers: `account` is the one the request's verified token names.
    func save(_ report: Data, as name: String, for account: Identity) async throws {
        try await policies.withAdmittedIdentity(account, reason: "PUT /documents") {
            try files.writeFile(atPath: documents + "/" + name, contents: report)   // owned by account
        }
    }

    func read(_ name: String, for account: Identity) async throws -> Data {
        try await policies.withAdmittedIdentity(account, reason: "GET /documents") {
            try files.readFile(atPath: documents + "/" + name)   // another tenant's account: accessDenied (108)
        }
    }
}
// quick start: end

import Testing

@Suite struct QuickStartTests {
    @Test func quickStartServesAnAccountsFileEncryptedAndOnlyToItsTenant() async throws {
        let directory = try TemporaryDirectory()
        let service = try DocumentService(directory: directory.path)
        let report = Data("Q3: 1.2M".utf8)

        try await service.save(report, as: "q3.txt", for: "alice@contoso.com")

        #expect(try await service.read("q3.txt", for: "alice@contoso.com") == report)
        #expect(try service.files.protectionInfo(atPath: directory.path + "/documents/q3.txt")?.owner == "alice@contoso.com")
        let onDisk = try Data(contentsOf: URL(fileURLWithPath: directory.path + "/documents/q3.txt"))
        #expect(onDisk.range(of: report) == nil, "a managed account's file is encrypted at rest")
        await #expect {
            _ = try await service.read("q3.txt", for: "bob@fabrikam.com")
        } throws: { error in
            guard case .accessDenied(let owner, let reader)? = error as? ProtectionError else { return false }
            return owner == "alice@contoso.com" && reader == "bob@fabrikam.com"
        }
    }

    @Test func quickStartWipeDeletesTheAccountsFiles() async throws {
        let directory = try TemporaryDirectory()
        let service = try DocumentService(directory: directory.path)
        try await service.save(Data("draft".utf8), as: "draft.txt", for: "alice@contoso.com")

        await service.policies.wipeData(forAccount: "alice@contoso.com")

        #expect(!FileManager.default.fileExists(atPath: directory.path + "/documents/draft.txt"))
    }
}
