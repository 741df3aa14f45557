import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("tenant(for:): every account has a tenant")
struct TenantTests {
    @Test("registered tenant ID first, then the domain of the name, then the account's own tenant")
    func tenantOfEveryAccount() {
        let manager = PolicyManager(policySource: StaticPolicySource([:]))
        // The domain of the name.
        #expect(manager.tenant(for: alice) == "contoso.com")
        #expect(manager.tenant(for: "Erin@Contoso.COM") == "contoso.com")
        // A registered tenant ID wins over the domain.
        manager.registerAccount(alice, tenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47")
        #expect(manager.tenant(for: alice) == "72f988bf-86f1-41af-91ab-2d7cd011db47")
        // No domain: a tenant of its own, the name followed by "@".
        #expect(manager.tenant(for: "svc-backup").rawValue == "svc-backup@")
        #expect(manager.tenant(for: "alice@").rawValue == "alice@@")   // an empty domain is no domain
        // ... that no domain's tenant can equal, even for a name spelled like a domain.
        #expect(manager.tenant(for: "contoso.com").rawValue == "contoso.com@")
        #expect(manager.tenant(for: "contoso.com") != manager.tenant(for: bob))
        // A domain-less account registered with a tenant ID belongs to that tenant.
        manager.registerAccount("svc-backup", tenantID: "contoso.com")
        #expect(manager.tenant(for: "svc-backup") == manager.tenant(for: bob))
        // Registering again without a tenant ID goes back to the rules above.
        manager.registerAccount("svc-backup")
        #expect(manager.tenant(for: "svc-backup").rawValue == "svc-backup@")
        #expect(manager.tenant(for: .unmanaged).rawValue == "@")
    }

    @Test("two accounts without a domain are not one tenant: sameTenant transfers between them are refused")
    func domainlessAccountsAreSeparateTenants() {
        let svc: Identity = "svc-backup", ops: Identity = "svc-ops", contosoNamed: Identity = "contoso.com"
        let manager = PolicyManager(policySource: StaticPolicySource([
            svc: ownedPolicy("svc"), ops: ownedPolicy("ops"), contosoNamed: ownedPolicy("named like a domain"),
            alice: ownedPolicy("alice"),
        ]))
        #expect(manager.policy(for: svc).dataTransfer == .sameTenant)
        #expect(!manager.isDataTransferAllowed(from: svc, to: ops))
        #expect(!manager.isDataTransferAllowed(from: ops, to: svc))
        #expect(!manager.isDataTransferAllowed(from: contosoNamed, to: alice))
        #expect(!manager.isDataTransferAllowed(from: alice, to: contosoNamed))
        // Registered into one tenant, they share it.
        manager.registerAccount(svc, tenantID: "ops-team")
        manager.registerAccount(ops, tenantID: "ops-team")
        #expect(manager.isDataTransferAllowed(from: svc, to: ops))
    }

    @Test("an account's own tenant equals no tenant ID registered or claimed, however it is spelled")
    func ownTenantIsNobodyElses() {
        let svc: Identity = "svc-backup", mallory: Identity = "mallory"
        let manager = PolicyManager(policySource: StaticPolicySource([svc: ownedPolicy("svc"), mallory: ownedPolicy("mallory")]))
        for spelling in ["svc-backup@", "SVC-BACKUP@", " svc-backup@ "] {
            manager.registerAccount(mallory, tenantID: TenantID(spelling))
            #expect(manager.tenant(for: mallory) != manager.tenant(for: svc))
            #expect(manager.tenant(for: mallory).rawValue.lowercased() == manager.tenant(for: svc).rawValue.lowercased())
            #expect(!manager.isDataTransferAllowed(from: svc, to: mallory))
            #expect(!manager.isDataTransferAllowed(from: mallory, to: svc))
            #expect(TenantID(spelling) != manager.tenant(for: svc))
        }
        #expect(manager.tenant(for: svc) == manager.tenant(for: svc))
        #expect(Set([manager.tenant(for: svc), TenantID("svc-backup@")]).count == 2)
    }
}
