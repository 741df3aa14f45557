import Foundation
import IdentityPolicy
import IdentityRuntime
import Testing

typealias SaveCase = (SaveLocation, Identity?, Bool)
typealias OpenCase = (OpenLocation, Identity?, Bool)

@Suite("Policy: which identity gets which policy, and the location rules")
struct PolicyTests {
    static let restricted = Policy(
        identity: alice, allowedSaveLocations: [.oneDriveForBusiness, .sharePoint, .localDrive],
        allowedOpenLocations: [.oneDriveForBusiness, .camera], isFileEncryptionRequired: true,
        notificationPolicy: .blockOrgData, appConfiguration: ["theme": .string("dark")])

    @Test("one managed account (maxManagedAccounts = 1): no identity, unmanaged and non-primary accounts get the unrestricted policy", arguments: [
        Identity?.none, .some(.unmanaged), .some(dave), .some(bob),
    ])
    func unrestricted(identity: Identity?) {
        let manager = makeManager(settings: .singleManagedAccount, policySource: StaticPolicySource([alice: Self.restricted, bob: Self.restricted]))
        let policy = manager.policy(for: identity)
        #expect(policy == .unrestricted)
        #expect(!policy.isRestricted && !policy.isFileEncryptionRequired)
        #expect(policy.isSaveToAllowed(for: .other) && policy.isOpenFromAllowed(for: [.photos, .box], account: nil))
    }

    @Test("the primary user gets its policy; without one, unrestricted, or locked when a policy is required")
    func primaryUser() {
        let source = StaticPolicySource()
        var settings = RuntimeSettings()
        let manager = makeManager(settings: settings, policySource: source)
        #expect(manager.policy(for: alice) == .unrestricted)
        settings.policyRequired = true
        manager.settings = settings
        #expect(manager.policy(for: alice) == .locked(for: alice))
        #expect(!manager.policy(for: alice).isSaveToAllowed(for: .localDrive))
        source.setPolicy(Self.restricted, for: alice)
        let policy = manager.policy(for: "ALICE@CONTOSO.COM")
        #expect(policy.isRestricted && policy.isFileEncryptionRequired)
        #expect(policy.notificationPolicy == .blockOrgData)
        #expect(policy.appConfigurationValue(forKey: "theme") == .string("dark"))
        #expect(manager.isFileEncryptionRequired(for: alice))
        #expect(!manager.isFileEncryptionRequired(for: bob))
    }

    @Test("policy follows the effective identity: thread, then process (UI only on the main thread)")
    func effectivePolicy() async {
        let manager = makeManager(policySource: StaticPolicySource([alice: Self.restricted]))
        #expect(manager.processIdentity == alice)   // single-identity mode
        #expect(manager.policy.isRestricted)
        IdentityContext.withThreadIdentity(dave) {
            #expect(!manager.policy.isRestricted)
            #expect(!manager.policy(forWindow: "w").isRestricted)
        }
        #expect(await switchUI(manager, dave, window: "w") == .success)
        #expect(manager.policy(forWindow: "w").isRestricted)   // not on the main thread: the UI identity does not apply
        let onMain = await MainActor.run { manager.policy(forWindow: "w").isRestricted }
        #expect(!onMain)
    }

    @Test("multi-identity mode: the process identity does not follow the primary user")
    func multiIdentity() {
        var settings = RuntimeSettings()
        settings.multiIdentity = true
        let manager = makeManager(settings: settings)
        #expect(manager.primaryUser == alice)
        #expect(manager.processIdentity == nil)
        manager.processIdentity = dave
        #expect(manager.processIdentity == dave)
    }

    static let saveCases: [SaveCase] = [
        (SaveLocation.oneDriveForBusiness, Identity?.some(alice), true),
        (.oneDriveForBusiness, .some("Alice@Contoso.com"), true),
        (.oneDriveForBusiness, .some(dave), false),            // org data to a personal cloud
        (.oneDriveForBusiness, Identity?.none, false),         // unknown account
        (.box, .some(alice), false),                           // not an allowed location
        (.localDrive, Identity?.none, true),                   // no account needed
        (.localDrive, .some(dave), true),                      // account ignored
        (.cameraRoll, Identity?.none, false),
        (.accountDocument, .some(alice), true),                // the managed account's own document
        (.accountDocument, .some(dave), false),
        (.accountDocument, Identity?.none, false),
        (.other, .some(alice), false),                         // unknown location
        ([.oneDriveForBusiness, .localDrive], .some(alice), true),
        ([.oneDriveForBusiness, .box], .some(alice), false),   // every bit must be allowed
        (SaveLocation(rawValue: 1 << 20), .some(alice), false), // a bit from a newer SDK: unknown
        (.sharePoint, .some(.unmanaged), false),
    ]

    @Test("save rules", arguments: saveCases)
    func saveRules(rule: SaveCase) {
        #expect(Self.restricted.isSaveToAllowed(for: rule.0, account: rule.1) == rule.2)
    }

    static let openCases: [OpenCase] = [
        (OpenLocation.oneDriveForBusiness, Identity?.some(alice), true),
        (.oneDriveForBusiness, .some(dave), false),
        (.sharePoint, .some(alice), false),
        (.camera, Identity?.none, true),
        (.photos, Identity?.none, false),
        (.localStorage, .some(alice), false),
        (.accountDocument, .some(alice), true),
        (.accountDocument, .some(carol), false),
        (.other, Identity?.none, false),
        ([.camera, .photos], Identity?.none, false),
    ]

    @Test("open rules", arguments: openCases)
    func openRules(rule: OpenCase) {
        #expect(Self.restricted.isOpenFromAllowed(for: rule.0, account: rule.1) == rule.2)
    }

    @Test("unknown locations follow their own switches")
    func unknownLocations() {
        var policy = Self.restricted
        policy.isSaveToUnknownLocationAllowed = true
        policy.isOpenFromUnknownLocationAllowed = true
        #expect(policy.isSaveToAllowed(for: .other))
        #expect(policy.isOpenFromAllowed(for: .other, account: dave))
        #expect(!policy.isSaveToAllowed(for: .box, account: alice))
    }
}
