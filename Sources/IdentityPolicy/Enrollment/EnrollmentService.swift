import IdentityRuntime

/// What an enrollment service answered.
public struct EnrollmentServiceResponse: Sendable, Hashable {
    /// What the service answered.
    public var statusCode: EnrollmentStatusCode
    /// The service's message, if any (for logs; never shown as a decision).
    public var message: String?

    /// An answer with `statusCode` and an optional message.
    public init(_ statusCode: EnrollmentStatusCode, message: String? = nil) {
        self.statusCode = statusCode
        self.message = message
    }
}

/// The back end the ``EnrollmentManager`` talks to: a management service, or for a self-contained service,
/// ``LocalEnrollmentService``. Implementations must be thread-safe.
public protocol EnrollmentService: Sendable {
    /// Enrolls `account`.
    func enroll(_ account: Identity) async -> EnrollmentServiceResponse
    /// Checks in for `account`'s policy.
    func checkIn(_ account: Identity) async -> EnrollmentServiceResponse
    /// Unenrolls `account`.
    func unenroll(_ account: Identity) async -> EnrollmentServiceResponse
}

/// An ``EnrollmentService`` without a server: every account enrolls; the policy is whatever the policy
/// source holds (``EnrollmentStatusCode/newPoliciesReceived`` when it has one,
/// ``EnrollmentStatusCode/noPolicyReceived`` otherwise).
public struct LocalEnrollmentService: EnrollmentService {
    private let hasPolicy: @Sendable (Identity) -> Bool

    /// Answers from `policySource`: an account's own document, or its domain's tenant document.
    public init(policySource: (any PolicySource)?) {
        hasPolicy = { account in policySource?.policy(for: account) != nil }
    }

    /// Answers from `policyManager`'s source, with the tenants registered there (a tenant ID given to
    /// ``EnrollmentManager/registerAndEnrollAccount(_:tenantID:objectID:)`` selects that tenant's document).
    public init(policyManager: PolicyManager) {
        hasPolicy = { [weak policyManager] account in
            guard let policyManager else { return false }
            let tenant = policyManager.accountInfo(for: account)?.tenantID
            return policyManager.policySource?.policies.policy(for: account, tenant: tenant) != nil
        }
    }

    public func enroll(_ account: Identity) async -> EnrollmentServiceResponse {
        EnrollmentServiceResponse(hasPolicy(account) ? .newPoliciesReceived : .noPolicyReceived)
    }

    public func checkIn(_ account: Identity) async -> EnrollmentServiceResponse {
        EnrollmentServiceResponse(hasPolicy(account) ? .policiesHaveNotChanged : .noPolicyReceived)
    }

    public func unenroll(_ account: Identity) async -> EnrollmentServiceResponse {
        EnrollmentServiceResponse(.unenrollmentSuccess)
    }
}
