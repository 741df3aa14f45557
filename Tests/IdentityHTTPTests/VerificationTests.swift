import Foundation
import IdentityAssertions
import IdentityHTTP
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("IdentityHTTPVerification: the token, the tenant claim, an undecided policy, in that order")
struct VerificationTests {
    let key: AssertionSigningKey
    let signer: IdentityAssertionSigner
    let source = LatePolicySource()
    let policies: PolicyManager

    init() throws {
        key = try AssertionSigningKey()
        signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "gateway")
        policies = PolicyManager(policySource: source)
    }

    func verify(_ token: String, checksTenant: Bool = true) throws(IdentityHTTPProblem) -> IdentityHTTPVerification {
        let verifier = IdentityAssertionVerifier(keys: ["k1": key.publicKey], issuers: ["gateway"], audience: "documents")
        return try IdentityHTTPVerification(
            token: IdentityHTTPToken(token: token, source: .bearerToken), verifier: verifier, policies: policies,
            checksTenant: checksTenant)
    }

    func problem(_ token: String, checksTenant: Bool = true) -> IdentityHTTPProblem? {
        do { _ = try verify(token, checksTenant: checksTenant); return nil } catch { return error }
    }

    @Test("a verified token: the account, its tenant and policy, where the token came from")
    func verified() throws {
        source.load(tenants: ["contoso.com": .unrestricted])
        let verified = try verify(signer.sign(account: "alice@contoso.com", tenant: "contoso.com", audience: "documents"))
        #expect(verified.account == "alice@contoso.com")
        #expect(verified.tenant == "contoso.com")
        #expect(verified.source == .bearerToken)
        #expect(verified.policy == policies.policy(for: "alice@contoso.com"))
        let admitted = AdmittedIdentity(verified)
        #expect(admitted.account == verified.account && admitted.tenant == "contoso.com")
        #expect(admitted.policy == verified.policy && admitted.source == .bearerToken)
        #expect(admitted.assertion.tokenID == verified.assertion.tokenID)
    }

    @Test("an admitted identity prints its account, tenant and source, and dumps its parts by name, never its token")
    func admittedIdentityPrintsItsParts() throws {
        source.load(tenants: ["contoso.com": .unrestricted])
        let token = try signer.sign(account: "alice@contoso.com", tenant: "contoso.com", audience: "documents")
        let admitted = AdmittedIdentity(try verify(token))
        #expect(admitted.description == "AdmittedIdentity(alice@contoso.com, tenant: contoso.com, source: bearerToken)")
        #expect(Mirror(reflecting: admitted).children.map(\.label) == ["account", "tenant", "policy", "assertion", "source"])
        #expect(!"\(admitted)".contains(token))
    }

    @Test("a forged or foreign token is its 401 before anything else, even before the policies load")
    func tokenFirst() throws {
        let other = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "k1", issuer: "gateway")
        let forged = problem(try other.sign(account: "alice@contoso.com", audience: "documents"))
        #expect(forged?.status == 401)
        #expect(problem(try signer.sign(account: "alice@contoso.com", audience: "billing"))?.status == 401)
    }

    @Test("a tid that is not the account's tenant: 401 tenant-mismatch, unless the check is off")
    func tenantMismatch() throws {
        source.load()
        let token = { try signer.sign(account: "alice@contoso.com", tenant: "fabrikam.com", audience: "documents") }
        let mismatch = problem(try token())
        #expect(mismatch?.code == "tenant-mismatch" && mismatch?.status == 401)
        #expect(problem(try token(), checksTenant: false) == nil)
        // An account without a domain is a tenant of its own: a tid naming its bare name is someone else's.
        #expect(problem(try signer.sign(account: "svc-backup", tenant: "svc-backup", audience: "documents"))?.code == "tenant-mismatch")
    }

    @Test("the tid check compares as tenants do: another case or a registered ID passes, the own tenant of an account without a domain spelled out (svc-backup@) does not")
    func tenantClaimComparesAsTenants() throws {
        source.load()
        policies.registerAccount("bob@contoso.com", tenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47")
        func claim(_ account: Identity, _ tenant: String) throws -> IdentityHTTPProblem? {
            problem(try signer.sign(account: account, tenant: tenant, audience: "documents"))
        }
        #expect(try claim("alice@contoso.com", "contoso.com") == nil)
        #expect(try claim("alice@contoso.com", "CONTOSO.com") == nil)
        #expect(try claim("bob@contoso.com", "72f988bf-86f1-41af-91ab-2d7cd011db47") == nil)
        #expect(try claim("bob@contoso.com", "contoso.com")?.code == "tenant-mismatch")
        // Its own tenant is written "svc-backup@" but equals no tenant a string names, this one included.
        #expect(try claim("svc-backup", "svc-backup@")?.code == "tenant-mismatch")
        #expect(try claim("svc-backup", "SVC-BACKUP@")?.code == "tenant-mismatch")
    }

    @Test("an account whose tenant's policy document cannot be read: 503 policy-unavailable, its tenant's peers verify")
    func undecidedAccount() throws {
        source.load(PolicySet(tenants: ["fabrikam.com": .unrestricted], unavailableTenants: ["contoso.com"]))
        let undecided = problem(try signer.sign(account: "alice@contoso.com", tenant: "contoso.com", audience: "documents"))
        #expect(undecided?.code == "policy-unavailable" && undecided?.status == 503)
        #expect(problem(try signer.sign(account: "bob@fabrikam.com", tenant: "fabrikam.com", audience: "documents")) == nil)
        source.load(PolicySet(tenants: ["fabrikam.com": .unrestricted, "contoso.com": .unrestricted]))
        #expect(problem(try signer.sign(account: "alice@contoso.com", tenant: "contoso.com", audience: "documents")) == nil)
    }

    @Test("what a verification reads in one critical section is what the manager's separate reads answer")
    func oneReadAnswersAsTheSeparateReads() throws {
        let accounts: [Identity] = [
            "alice@contoso.com", "bob@fabrikam.com", "carol@unknown.org", "svc-backup", "dave@contoso.com", "erin@contoso.com",
        ]
        func agree(_ stage: String) {
            for account in accounts {
                let standing = policies.boundaryStanding(of: account)
                #expect(standing.tenant == policies.tenant(for: account), "\(stage): \(account)")
                #expect(standing.policy == policies.policy(for: account), "\(stage): \(account)")
                let refusal = policies.refusal(of: .create, to: account)
                let unavailable: ProtectionError? = if case .policyUnavailable = refusal { refusal } else { nil }
                #expect(standing.unavailable?.code == unavailable?.code, "\(stage): \(account)")
                #expect(standing.unavailable?.description == unavailable?.description, "\(stage): \(account)")
            }
        }
        agree("before the first load")
        #expect(policies.boundaryStanding(of: "alice@contoso.com").unavailable?.code == 115)
        policies.registerAccount("dave@contoso.com", tenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47")
        source.load(
            PolicySet(tenants: ["fabrikam.com": Policy(identity: nil, isFileEncryptionRequired: true)], unavailableTenants: ["contoso.com"]))
        policies.blockAccount("bob@fabrikam.com", reason: .blockedByAdministrator)
        agree("contoso undecided, bob blocked")
        #expect(policies.boundaryStanding(of: "erin@contoso.com").unavailable?.code == 115)
        #expect(policies.boundaryStanding(of: "bob@fabrikam.com").unavailable == nil)
        #expect(policies.boundaryStanding(of: "dave@contoso.com").tenant == "72f988bf-86f1-41af-91ab-2d7cd011db47")
        source.load(tenants: ["contoso.com": Policy(identity: nil, isFileEncryptionRequired: false)])
        agree("every document readable")
        #expect(policies.boundaryStanding(of: "erin@contoso.com").unavailable == nil)
        #expect(policies.boundaryStanding(of: "erin@contoso.com").policy.isFileEncryptionRequired == false)
    }

    @Test("before the policy source loads: 503 policy-unavailable; after, the same token shape verifies")
    func policyUnavailable() throws {
        let before = problem(try signer.sign(account: "alice@contoso.com", audience: "documents"))
        #expect(before?.code == "policy-unavailable" && before?.status == 503)
        source.load()
        #expect(problem(try signer.sign(account: "alice@contoso.com", audience: "documents")) == nil)
    }
}

@Suite("IdentityHTTPToken.bearerToken: the Bearer scheme, case-insensitive, one space, then the token")
struct BearerTokenTests {
    /// The rule by characters (grapheme clusters), which the byte-level fast path must answer exactly as.
    static func byCharacters(_ value: String) -> String? {
        let scheme = value.prefix(7)
        guard scheme.count == 7, scheme.lowercased() == "bearer " else { return nil }
        return String(value.dropFirst(7))
    }

    @Test("the fast path on the bytes answers as the rule by characters", arguments: [
        "Bearer abc.def.ghi", "bearer abc", "BEARER abc", "bEaReR x", "Bearer ", "Bearer", "Beare", "",
        "Basic abc", "Bearer\tabc", "Bearer  abc", "Bearerabc", "Bearer\r\nabc", "Bearer \u{301}abc",
        "Bearer ébc", "Bearer \u{1F600}", "Béarer abc", "B\u{301}earer abc", "Bearer\u{301} abc", "bearer é",
        "Bearer abc\u{301}", "ＢEARER abc", "Bearer \r\nabc",
    ])
    func agreesWithTheRuleByCharacters(value: String) {
        #expect(IdentityHTTPToken.bearerToken(inAuthorization: value) == Self.byCharacters(value))
    }

    @Test("every ASCII byte after the scheme, and at each place of the scheme, answers as the rule by characters")
    func everyASCIIByte() {
        for byte in UInt8(0)...0x7F {
            let character = String(UnicodeScalar(byte))
            var values = ["Bearer " + character, "Bearer " + character + "x"]
            for index in 0..<7 {
                var scheme = Array("Bearer ")
                scheme[index] = Character(character)
                values.append(String(scheme) + "token")
            }
            for value in values {
                #expect(IdentityHTTPToken.bearerToken(inAuthorization: value) == Self.byCharacters(value), "\(String(reflecting: value))")
            }
        }
    }

    @Test("random values near the scheme, with combining marks, CR LF, NUL and wide characters, answer as the rule by characters")
    func randomValuesNearTheScheme() {
        let pieces = ["b", "B", "e", "E", "a", "A", "r", "R", " ", "\r", "\n", "\r\n", "\u{0}", "\u{301}", "é", "ＢＥ",
                      "\u{1F600}", "x", ".", "\u{7F}", "\u{80}", "\u{FEFF}", "İ", "\u{212A}"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            // Mostly a scheme with one or two pieces changed, so that the values sit near the fast path's edges.
            var parts = ["B", "e", "a", "r", "e", "r", " "]
            for _ in 0..<Int.random(in: 1...2, using: &generator) {
                parts[Int.random(in: 0..<parts.count, using: &generator)] = pieces.randomElement(using: &generator)!
            }
            let value = parts.joined() + (0..<Int.random(in: 0...3, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }.joined()
            #expect(IdentityHTTPToken.bearerToken(inAuthorization: value) == Self.byCharacters(value), "\(String(reflecting: value))")
        }
    }
}
