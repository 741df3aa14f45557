import Foundation
import IdentityAssertions
import IdentityHTTP
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

/// What the edge reads about an account comes from one state of the manager: a policy that can be decided is
/// never paired with a refusal, an undecided account's locked policy never without one, and before the first
/// load every account is refused.
@Suite("The edge reads an account's tenant, policy and decidability from one state of the manager")
struct BoundaryStandingConsistencyTests {
    private static let contoso = Policy(identity: nil, isFileEncryptionRequired: true)
    private static let fabrikam = Policy(identity: nil, isFileEncryptionRequired: false, isPINRequired: true)
    private static let alicePolicy = Policy(identity: nil, isFileEncryptionRequired: true, isPINRequired: true)
    private static let accounts: [Identity] = [
        "alice@contoso.com", "erin@contoso.com", "bob@fabrikam.com", "dave@gmail.com", "svc-backup", .unmanaged,
    ]
    /// Policy sets the writer switches between: everything readable, a tenant's document unreadable, an
    /// incomplete set (every account it does not name is undecided).
    private static let policySets: [PolicySet] = [
        PolicySet(tenants: ["contoso.com": contoso, "fabrikam.com": fabrikam]),
        PolicySet(tenants: ["fabrikam.com": fabrikam], unavailableTenants: ["contoso.com"]),
        PolicySet(accounts: ["alice@contoso.com": alicePolicy], isComplete: false),
    ]

    /// The invariant one read must keep, whatever the manager's state: decidable exactly when the policy is not
    /// the locked one of an undecided account, and every managed policy one of the documents'.
    private static func isConsistent(_ standing: BoundaryStanding, of account: Identity) -> Bool {
        let locked = standing.policy == .locked(for: account)
        if account.isUnmanaged { return standing.policy == .unrestricted }
        if locked { return standing.unavailable?.code == 115 }
        if let unavailable = standing.unavailable {
            // Before the first load every account reads as unknown: refused, whatever its policy would be.
            return standing.policy == .unrestricted && unavailable.description.contains("has not loaded yet")
        }
        // A document's policy is handed out with the account as its identity.
        var document = standing.policy
        document.identity = nil
        return standing.unavailable == nil && [.unrestricted, contoso, fabrikam, alicePolicy].contains(document)
    }

    @Test("before the first load every account is refused policy-unavailable, and its policy is not used")
    func refusedBeforeTheFirstLoad() throws {
        let policies = PolicyManager(policySource: LatePolicySource())
        policies.registerAccount("dave@gmail.com", tenantID: "72f988bf-86f1-41af-91ab-2d7cd011db47")
        for account in Self.accounts {
            let standing = policies.boundaryStanding(of: account)
            #expect(standing.unavailable?.code == 115, "\(account)")
            if !account.isUnmanaged {
                #expect(IdentityHTTPProblem.policyUnavailable(for: account, in: policies)?.status == 503, "\(account)")
            }
        }
        let key = try AssertionSigningKey()
        let signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "gateway")
        let verifier = IdentityAssertionVerifier(keys: ["k1": key.publicKey], issuers: ["gateway"], audience: "documents")
        for account in ["alice@contoso.com", "dave@gmail.com"] as [Identity] {
            do {
                _ = try IdentityHTTPVerification(
                    token: IdentityHTTPToken(token: try signer.sign(account: account, audience: "documents"), source: .bearerToken),
                    verifier: verifier, policies: policies, checksTenant: false)
                Issue.record("\(account) verified before the first load")
            } catch let problem as IdentityHTTPProblem {
                #expect(problem.code == "policy-unavailable" && problem.status == 503)
            } catch {
                Issue.record(error)
            }
        }
    }

    @Test("while policies reload and accounts are registered and blocked, every read is of one state")
    func readsUnderConcurrentChanges() async throws {
        let source = LatePolicySource()
        let policies = PolicyManager(policySource: source)
        let key = try AssertionSigningKey()
        let signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "gateway")
        let verifier = IdentityAssertionVerifier(keys: ["k1": key.publicKey], issuers: ["gateway"], audience: "documents")
        let tokens = try Dictionary(uniqueKeysWithValues: ["alice@contoso.com", "erin@contoso.com", "bob@fabrikam.com"].map {
            (Identity($0), try signer.sign(account: Identity($0), audience: "documents"))
        })
        let stop = LockedValue(false)
        let (inconsistent, verifiedLocked, reads) = await withTaskGroup(of: (Int, Int, Int).self) { group in
            group.addTask {
                // Readers start before the first load: not loaded is a state of its own, refused.
                for round in 0..<400 {
                    source.load(Self.policySets[round % Self.policySets.count])
                    if round % 7 == 0 { policies.registerAccount("erin@contoso.com", tenantID: "9e3b1f6a-0000-4000-8000-000000000001") }
                    if round % 5 == 0 { policies.blockAccount("bob@fabrikam.com", reason: .blockedByAdministrator) }
                    if round % 5 == 2 { policies.unblockAccount("bob@fabrikam.com") }
                    if round % 3 == 0 { await Task.yield() }
                }
                stop.withLock { $0 = true }
                return (0, 0, 0)
            }
            for _ in 0..<2 {
                group.addTask {
                    var inconsistent = 0, verifiedLocked = 0, reads = 0
                    repeat {
                        for account in Self.accounts {
                            let standing = policies.boundaryStanding(of: account)
                            if !Self.isConsistent(standing, of: account) { inconsistent += 1 }
                            reads += 1
                        }
                        for (account, token) in tokens {
                            // A verification that passes never carries an undecided account's locked policy.
                            if let verified = try? IdentityHTTPVerification(
                                token: IdentityHTTPToken(token: token, source: .bearerToken), verifier: verifier,
                                policies: policies, checksTenant: false),
                                verified.policy == .locked(for: account) {
                                verifiedLocked += 1
                            }
                        }
                        await Task.yield()
                    } while !stop.withLock({ $0 })
                    return (inconsistent, verifiedLocked, reads)
                }
            }
            return await group.reduce((0, 0, 0)) { ($0.0 + $1.0, $0.1 + $1.1, $0.2 + $1.2) }
        }
        #expect(inconsistent == 0)
        #expect(verifiedLocked == 0)
        #expect(reads > 0)
        // Settled: the one read says what the separate reads say.
        for account in Self.accounts {
            let standing = policies.boundaryStanding(of: account)
            #expect(standing.tenant == policies.tenant(for: account), "\(account)")
            #expect(standing.policy == policies.policy(for: account), "\(account)")
            let refusal = policies.refusal(of: .create, to: account)
            let unavailable: ProtectionError? = if case .policyUnavailable = refusal { refusal } else { nil }
            #expect(standing.unavailable?.description == unavailable?.description, "\(account)")
        }
    }
}
