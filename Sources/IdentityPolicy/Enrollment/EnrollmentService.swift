import IdentityRuntime

/// What an enrollment service answered.
public struct EnrollmentServiceResponse: Sendable, Hashable {
    public var statusCode: EnrollmentStatusCode
    public var message: String?

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
    private let source: (any PolicySource)?

    public init(policySource: (any PolicySource)?) {
        source = policySource
    }

    public func enroll(_ account: Identity) async -> EnrollmentServiceResponse {
        EnrollmentServiceResponse(source?.policy(for: account) != nil ? .newPoliciesReceived : .noPolicyReceived)
    }

    public func checkIn(_ account: Identity) async -> EnrollmentServiceResponse {
        EnrollmentServiceResponse(source?.policy(for: account) != nil ? .policiesHaveNotChanged : .noPolicyReceived)
    }

    public func unenroll(_ account: Identity) async -> EnrollmentServiceResponse {
        EnrollmentServiceResponse(.unenrollmentSuccess)
    }
}
