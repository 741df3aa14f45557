import IdentityAssertions
import IdentityPolicy
import IdentityRuntime

/// A request's verified identity, decided by the rules both middlewares (IdentityHummingbird, IdentityVapor)
/// follow, independent of any web framework. In order:
///
/// 1. The token (``IdentityHTTPToken``) is verified by the service's `IdentityAssertionVerifier`: a refusal is
///    the token's 401 (``IdentityHTTPProblem/token(_:typeBase:)``).
/// 2. With `checksTenant`, a token's `tid` claim must be the runtime's tenant of the account (the tenant
///    `PolicyManager.tenant(for:)` answers, read with the policy in one critical section of the manager): else
///    401 `tenant-mismatch`. A token without `tid` passes this step.
/// 3. Before the policy source has loaded, every account's policy would read as unrestricted, and an account
///    whose policy document cannot be read has no policy anyone can tell: 503 `policy-unavailable`
///    (``IdentityHTTPProblem/policyUnavailable(for:in:typeBase:)``) instead.
///
/// Admission (blocks, allowed accounts, admission checks) comes after this, in
/// `PolicyManager.withAdmittedIdentity(_:reason:isolation:operation:)`; a verified identity is not admitted yet.
public struct IdentityHTTPVerification: Sendable {
    /// The verified assertion.
    public let assertion: IdentityAssertion
    /// The runtime's tenant of the account (`PolicyManager.tenant(for:)`).
    public let tenant: TenantID
    /// The account's policy when it was verified.
    public let policy: Policy
    /// Which header carried the token.
    public let source: IdentityHTTPToken.Source

    /// The account the assertion names.
    public var account: Identity { assertion.account }

    /// Verifies `token` (steps 1 to 3 above).
    ///
    /// - Parameters:
    ///   - token: the request's token (``IdentityHTTPToken``).
    ///   - verifier: the service's verifier (its keys, trusted issuers, audience and mode).
    ///   - policies: the manager that answers the account's tenant and policy.
    ///   - checksTenant: whether a token's `tid` must be the account's tenant.
    ///   - problemTypeBase: the ``IdentityHTTPProblem/typeBase`` of the refusals.
    /// - Throws: the refusal's ``IdentityHTTPProblem``: the token's 401, 401 `tenant-mismatch`, 503
    ///   `policy-unavailable`.
    public init(
        token: IdentityHTTPToken, verifier: IdentityAssertionVerifier, policies: PolicyManager,
        checksTenant: Bool, problemTypeBase: String = IdentityHTTPProblem.defaultTypeBase
    ) throws(IdentityHTTPProblem) {
        let assertion: IdentityAssertion
        do { assertion = try verifier.verify(token.text) } catch {
            throw .token(error, typeBase: problemTypeBase)
        }
        let account = assertion.account
        // The tenant, the policy and whether it can be decided, under the manager's lock once.
        let standing = policies.boundaryStanding(of: account)
        if checksTenant, let claimed = assertion.tenant, !standing.tenant.isEqual(toRawValue: claimed) {
            throw .tenantMismatch(claimed: claimed, known: standing.tenant.rawValue, typeBase: problemTypeBase)
        }
        // Before the source loads, the policy would read as unrestricted for every account: refuse instead.
        if let unavailable = standing.unavailable {
            throw .policyUnavailable(unavailable, account: account, typeBase: problemTypeBase)
        }
        self.assertion = assertion
        self.tenant = standing.tenant
        self.policy = standing.policy
        self.source = token.source
    }
}
