import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

let erin: Identity = "erin@fabrikam.com"
let frank: Identity = "frank@northwind.example"

/// A restricted policy whose app configuration names `owner`, so a test sees whose policy it got.
func ownedPolicy(_ owner: String, encrypt: Bool = true, save: SaveLocation = [.localDrive, .oneDriveForBusiness]) -> Policy {
    Policy(
        identity: nil, allowedSaveLocations: save, allowedOpenLocations: [.camera],
        isFileEncryptionRequired: encrypt, notificationPolicy: .blockOrgData,
        appConfiguration: ["owner": .string(owner)])
}

@Suite("Many managed accounts: enrolled, own and tenant policies, tenants by ID, object IDs (article AccountsAndPolicies)")
struct ManyAccountsTests {
    @Test("every account with a policy (own or tenant's) and every enrolled account is managed, each under its own policy")
    func manyManaged() {
        let source = StaticPolicySource([alice: ownedPolicy("alice"), carol: ownedPolicy("carol")],
                                        tenants: ["fabrikam.com": ownedPolicy("fabrikam")])
        let manager = PolicyManager(policySource: source)
        manager.setPrimaryUser(frank)
        #expect(manager.isIdentityManaged(alice) && manager.isIdentityManaged(carol) && manager.isIdentityManaged(frank))
        #expect(manager.isIdentityManaged(erin))            // through fabrikam.com's tenant document
        #expect(!manager.isIdentityManaged(bob) && !manager.isIdentityManaged(dave))
        #expect(!manager.isIdentityManaged(.unmanaged) && !manager.isIdentityManaged(nil))
        #expect(manager.managedAccounts == [alice, carol, frank])   // erin is not known until registered
        manager.registerAccount(erin)
        #expect(manager.managedAccounts == [alice, carol, erin, frank])
        #expect(manager.policy(for: alice).appConfigurationValue(forKey: "owner") == .string("alice"))
        #expect(manager.policy(for: carol).appConfigurationValue(forKey: "owner") == .string("carol"))   // own wins
        #expect(manager.policy(for: erin).appConfigurationValue(forKey: "owner") == .string("fabrikam"))
        #expect(manager.policy(for: erin).identity == erin)
        #expect(manager.policy(for: frank) == .unrestricted)     // enrolled, no policy, none required
        #expect(manager.policy(for: bob) == .unrestricted)
        #expect(manager.primaryUser == frank)
        #expect(manager.isFileEncryptionRequired(for: erin) && !manager.isFileEncryptionRequired(for: bob))
    }

    @Test("a managed account without a policy is locked when a policy is required")
    func lockedWithoutPolicy() {
        var settings = RuntimeSettings()
        settings.policyRequired = true
        let manager = PolicyManager(settings: settings)
        manager.setPrimaryUser(frank)
        #expect(manager.policy(for: frank) == .locked(for: frank))
    }

    @Test("switching from one managed account to another runs the new account's checks")
    func switchBetweenManaged() async {
        let log = Recorder<String>()
        let source = StaticPolicySource([alice: ownedPolicy("alice"), carol: ownedPolicy("carol")])
        let manager = PolicyManager(policySource: source)
        manager.conditionalLaunchChecks = [RecordingCheck(name: "pin", outcome: .passes, log: log)]
        #expect(await switchUI(manager, alice, window: "w") == .success)
        #expect(await switchUI(manager, carol, window: "w") == .success)
        #expect(manager.uiPolicyIdentity(for: "w") == carol)
        #expect(log.all.map { $0.split(separator: ":")[1] } == ["alice@contoso.com", "carol@fabrikam.com"])
    }

    @Test("tenants: the registered tenant ID's document wins over the domain's; the account's own wins over both")
    func tenantsByID() {
        let tenantID: TenantID = "72F988BF-86F1-41AF-91AB-2D7CD011DB47"
        let source = StaticPolicySource([bob: ownedPolicy("bob")], tenants: [
            "contoso.com": ownedPolicy("contoso domain"), "72f988bf-86f1-41af-91ab-2d7cd011db47": ownedPolicy("contoso id"),
        ])
        let manager = PolicyManager(policySource: source)
        #expect(manager.policy(for: alice).appConfigurationValue(forKey: "owner") == .string("contoso domain"))
        #expect(manager.tenant(for: alice) == "contoso.com")
        let transitions = manager.events
        manager.registerAccount(alice, tenantID: tenantID, objectID: "0F1E2D3C-aaaa-bbbb-cccc-000000000001")
        #expect(manager.tenant(for: alice) == tenantID)
        #expect(manager.policy(for: alice).appConfigurationValue(forKey: "owner") == .string("contoso id"))
        #expect(manager.policy(for: bob).appConfigurationValue(forKey: "owner") == .string("bob"))
        #expect(manager.account(forObjectID: "0f1e2d3c-AAAA-bbbb-cccc-000000000001") == alice)
        #expect(manager.account(forObjectID: "unknown") == nil)
        #expect(manager.accountInfo(for: alice)?.objectID == "0F1E2D3C-aaaa-bbbb-cccc-000000000001")
        _ = transitions
    }

    @Test("policy documents name tenants by ID or by domain, and may block the account")
    func documentsNameTenantsByID() throws {
        let directory = try TemporaryDirectory()
        try directory.write("tenant-id.json", #"{"formatVersion": 1, "tenant": "72f988bf-86f1-41af-91ab-2d7cd011db47", "saveToLocations": ["localDrive"]}"#)
        try directory.write("blocked.json", #"{"formatVersion": 1, "account": "bob@contoso.com", "accountBlocked": true}"#)
        let source = try DirectoryPolicySource(directory: directory.path)
        source.reload()
        #expect(source.errors.isEmpty)
        #expect(source.policies.tenants[TenantID("72F988BF-86F1-41AF-91AB-2D7CD011DB47")]?.allowedSaveLocations == [.localDrive])
        let manager = PolicyManager(policySource: source)
        manager.registerAccount(alice, tenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47")
        #expect(manager.policy(for: alice).allowedSaveLocations == [.localDrive])
        #expect(manager.blockReason(for: bob) == .blockedByPolicy)
        #expect(manager.blockedAccounts == [bob])
    }

    @Test("with maxManagedAccounts = 2, only the first two enrolled accounts are managed; a third with a policy is claimed")
    func limit() async {
        var settings = RuntimeSettings()
        settings.maxManagedAccounts = 2
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource([carol: ownedPolicy("carol")]))
        manager.setEnrolled(alice, true)
        manager.setEnrolled(bob, true)
        manager.setEnrolled(frank, true)
        #expect(manager.managedAccounts == [alice, bob])
        #expect(!manager.isIdentityManaged(frank) && !manager.isIdentityManaged(carol))
        #expect(await switchUI(manager, carol, window: "w") == .notAllowed)
        #expect(await switchUI(manager, frank, window: "w") == .notAllowed)
        #expect(await switchUI(manager, bob, window: "w") == .success)
        manager.setEnrolled(alice, false)
        #expect(manager.managedAccounts == [bob, frank])
        settings.maxManagedAccounts = nil
        manager.settings = settings
        #expect(manager.managedAccounts == [bob, carol, frank])
    }
}

@Suite("Combined policies over several accounts (article AccountsAndPolicies)")
struct CombinedPolicyTests {
    static let source = StaticPolicySource([
        alice: Policy(identity: nil, allowedSaveLocations: [.localDrive, .oneDriveForBusiness, .box],
                      allowedOpenLocations: [.camera, .photos], isSaveToUnknownLocationAllowed: true,
                      isFileEncryptionRequired: false, notificationPolicy: .allow, isAppSharingAllowed: true,
                      isPINRequired: false, appConfiguration: ["theme": .string("dark"), "region": .string("eu"), "alice": .bool(true)]),
        carol: Policy(identity: nil, allowedSaveLocations: [.localDrive, .oneDriveForBusiness],
                      allowedOpenLocations: [.camera], isSaveToUnknownLocationAllowed: false,
                      isFileEncryptionRequired: true, notificationPolicy: .blockOrgData, isAppSharingAllowed: false,
                      isPINRequired: true, appConfiguration: ["theme": .string("dark"), "region": .string("us")]),
    ])

    @Test("locations only where all allow; encryption and PIN if any requires; strictest notifications; sharing only if all allow")
    func mostRestrictive() {
        let manager = PolicyManager(policySource: Self.source)
        let combined = manager.policy(for: [alice, carol])
        #expect(combined.allowedSaveLocations == [.localDrive, .oneDriveForBusiness])
        #expect(combined.allowedOpenLocations == [.camera])
        #expect(!combined.isSaveToUnknownLocationAllowed)
        #expect(combined.isFileEncryptionRequired && combined.isPINRequired)
        #expect(combined.notificationPolicy == .blockOrgData)
        #expect(!combined.isAppSharingAllowed)
        #expect(combined.combinedAccounts == [alice, carol])
        #expect(combined.identity == nil)
        #expect(combined.isSaveToAllowed(for: .localDrive))
        #expect(!combined.isSaveToAllowed(for: .box, account: alice))
        // Account-bound locations: neither organization's storage takes the other's data.
        #expect(!combined.isSaveToAllowed(for: .oneDriveForBusiness, account: alice))
        #expect(!combined.isSaveToAllowed(for: .oneDriveForBusiness, account: carol))
        #expect(manager.policy(for: alice).isSaveToAllowed(for: .oneDriveForBusiness, account: alice))
    }

    @Test("conflicting app-configuration values are reported, never picked; agreeing ones are kept")
    func conflicts() {
        let combined = PolicyManager(policySource: Self.source).policy(for: [carol, alice])
        #expect(combined.appConfiguration == ["theme": .string("dark"), "alice": .bool(true)])
        #expect(combined.appConfigurationValue(forKey: "region") == nil)
        #expect(combined.appConfigurationConflicts == [
            AppConfigurationConflict(key: "region", values: [alice: .string("eu"), carol: .string("us")]),
        ])
    }

    @Test("unmanaged accounts add nothing; one managed account gives its own policy; none gives unrestricted")
    func degenerate() {
        let manager = PolicyManager(policySource: Self.source)
        #expect(manager.policy(for: [alice, dave, .unmanaged]) == manager.policy(for: alice))
        #expect(manager.policy(for: [dave, bob]) == .unrestricted)
        #expect(manager.policy(for: [Identity]()) == .unrestricted)
        #expect(manager.policy(for: [alice, alice]) == manager.policy(for: alice))
    }

    @Test("a window showing several accounts runs every managed account's checks and applies the combined policy")
    func severalUIIdentities() async {
        let log = Recorder<String>()
        let manager = PolicyManager(policySource: Self.source)
        manager.conditionalLaunchChecks = [RecordingCheck(name: "pin", outcome: .passes, log: log)]
        #expect(await manager.setUIPolicyIdentities([alice, dave, carol], for: "inbox") == .success)
        #expect(manager.uiPolicyIdentities(for: "inbox") == [alice, dave, carol])
        #expect(manager.uiPolicyIdentity(for: "inbox") == alice)
        #expect(log.all.map { $0.split(separator: ":")[1] } == ["alice@contoso.com", "carol@fabrikam.com"])
        #expect(log.all.allSatisfy { entry in entry.split(separator: ":")[1] == entry.split(separator: ":")[3] })
        let onMain = await MainActor.run { manager.policy(forWindow: "inbox") }
        #expect(onMain == manager.policy(for: [alice, carol]))
        #expect(await manager.setUIPolicyIdentities([], for: "inbox") == .success)
        #expect(manager.uiPolicyIdentities(for: "inbox").isEmpty)
    }

    @Test("one account's failing check fails the whole call and blocks that account only")
    func severalWithFailure() async {
        let manager = PolicyManager(policySource: Self.source)
        manager.conditionalLaunchChecks = [ClosureConditionalLaunchCheck { identity, _ in identity == carol ? .fails : .passes }]
        #expect(await manager.setUIPolicyIdentities([alice, carol], for: "inbox") == .failed)
        #expect(manager.uiPolicyIdentities(for: "inbox").isEmpty)
        #expect(manager.blockedAccounts == [carol])
        #expect(await manager.setUIPolicyIdentities([alice, carol], for: "inbox") == .notAllowed)
        #expect(await manager.setUIPolicyIdentities([alice], for: "inbox") == .success)
    }
}
