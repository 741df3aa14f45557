import IdentityRuntime

/// The result of an enrollment operation, handed to the ``EnrollmentDelegate`` (the analog of
/// `IntuneMAMEnrollmentStatus`).
public struct EnrollmentStatus: Sendable, Hashable {
    /// The account the operation was for.
    public var identity: Identity
    /// Whether the operation succeeded (the code is 1xx).
    public var didSucceed: Bool { statusCode.isSuccess }
    /// What happened.
    public var statusCode: EnrollmentStatusCode
    /// Debug information, if any.
    public var errorString: String?

    /// A status for `identity` with `statusCode` and optional debug information.
    public init(identity: Identity, statusCode: EnrollmentStatusCode, errorString: String? = nil) {
        self.identity = identity
        self.statusCode = statusCode
        self.errorString = errorString
    }
}
