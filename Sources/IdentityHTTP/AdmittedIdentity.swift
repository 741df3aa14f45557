import IdentityAssertions
import IdentityPolicy
import IdentityRuntime

/// The identity a request was admitted under, as the service boundary's integrations leave it for handlers:
/// IdentityHummingbird in the request context (`context.admittedIdentity`), IdentityVapor on the request
/// (`request.admittedIdentity`), IdentityGRPC in a task-local (`AdmittedIdentity.current`). Each of those
/// modules names this type as its own `AdmittedIdentity`, so importing one of them is enough.
///
/// The same account is also the thread identity of everything the request runs
/// (`IdentityContext.currentThreadIdentity`), so code that never sees the request or its context (a queue, an
/// operation, a file write) still runs under it. Only the integrations make one for a request, after the
/// token was verified and the account admitted; one made by hand admits nobody.
public struct AdmittedIdentity: Sendable {
    // One reference: a request context is copied at every middleware and handler it passes through, and the
    // policy and the assertion hold a dozen references between them.
    private final class Storage: Sendable {
        let account: Identity
        let tenant: String
        let policy: Policy
        let assertion: IdentityAssertion
        let source: Source

        init(account: Identity, tenant: String, policy: Policy, assertion: IdentityAssertion, source: Source) {
            self.account = account
            self.tenant = tenant
            self.policy = policy
            self.assertion = assertion
            self.source = source
        }
    }

    private let storage: Storage

    /// Where the identity came from: the dedicated assertion header (for gRPC, the metadata key of that name)
    /// or `Authorization: Bearer <token>`.
    public typealias Source = IdentityHTTPToken.Source

    /// The account the request is for (the assertion's `sub`).
    public var account: Identity { storage.account }
    /// Its tenant: the runtime's tenant of the account (`PolicyManager.tenant(for:)`: its registered tenant ID,
    /// else the domain of its name, else its own tenant, `name@`).
    public var tenant: String { storage.tenant }
    /// The account's policy (`PolicyManager.policy(for:)`), fixed when the request was admitted.
    public var policy: Policy { storage.policy }
    /// The verified assertion (issuer, audience, expiry, token ID). Never forward its token (a single-use
    /// verifier has used it up, and its audience is this service); a call to another service signs a new one
    /// for that service's audience.
    public var assertion: IdentityAssertion { storage.assertion }
    /// Which header carried it.
    public var source: Source { storage.source }

    /// An admitted identity with these parts.
    public init(account: Identity, tenant: String, policy: Policy, assertion: IdentityAssertion, source: Source) {
        storage = Storage(account: account, tenant: tenant, policy: policy, assertion: assertion, source: source)
    }

    /// The identity a verification found: its account, tenant, policy, assertion and token source. (It is
    /// admitted once `PolicyManager.withAdmittedIdentity` admits its account.)
    public init(_ verification: IdentityHTTPVerification) {
        self.init(
            account: verification.account, tenant: verification.tenant.rawValue, policy: verification.policy,
            assertion: verification.assertion, source: verification.source)
    }
}

extension AdmittedIdentity: CustomStringConvertible, CustomReflectable {
    /// The account, its tenant and the header that carried it: `AdmittedIdentity(alice@contoso.com, tenant:
    /// contoso.com, source: bearerToken)`. The token is not part of it.
    public var description: String {
        "AdmittedIdentity(\(account.name), tenant: \(tenant), source: \(source))"
    }

    /// The five parts by name, as `dump` shows a structure's stored properties (they live behind one reference).
    public var customMirror: Mirror {
        Mirror(self, children: [
            "account": account, "tenant": tenant, "policy": policy, "assertion": assertion, "source": source,
        ], displayStyle: .struct)
    }
}
