/// Told the outcome of every enrollment operation (the analog of `IntuneMAMEnrollmentDelegate`). Called on
/// arbitrary threads, never while the runtime holds a lock. Every method has an empty default.
public protocol EnrollmentDelegate: AnyObject, Sendable {
    /// An enrollment (``EnrollmentManager/registerAndEnrollAccount(_:tenantID:objectID:)`` or a retry of it) finished.
    func enrollmentRequest(with status: EnrollmentStatus)
    /// A policy check-in (``EnrollmentManager/refreshPolicy()``, scheduled or explicit) finished.
    func policyRequest(with status: EnrollmentStatus)
    /// An unenrollment finished.
    func unenrollRequest(with status: EnrollmentStatus)
}

extension EnrollmentDelegate {
    public func enrollmentRequest(with status: EnrollmentStatus) {}
    public func policyRequest(with status: EnrollmentStatus) {}
    public func unenrollRequest(with status: EnrollmentStatus) {}
}
