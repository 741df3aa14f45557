/// The outcome code of an enrollment operation. Raw values are those of the Intune App SDK's
/// `IntuneMAMEnrollmentStatusCode`: 1xx success, 2xx failure.
public enum EnrollmentStatusCode: Int, Sendable, Hashable, CaseIterable {
    // 1xx: success
    /// The request succeeded and new policies were received.
    case newPoliciesReceived = 100
    /// The request succeeded; the policies have not changed since the last request.
    case policiesHaveNotChanged = 101
    /// The request succeeded and a selective wipe command was received.
    case wipeReceived = 102
    /// The request succeeded, but no policy targets the account.
    case noPolicyReceived = 103
    /// The account was unenrolled and deregistered.
    case unenrollmentSuccess = 104

    // 2xx: failure
    /// The tenant is enabled, but the account is not licensed.
    case accountNotLicensed = 200
    /// An internal error; see the status's `errorString`.
    case internalError = 201
    /// Obsolete in the anchor; kept for the raw value.
    case mamServiceDisabled = 202
    /// The account's credentials are needed.
    case authRequired = 203
    /// The location service could not be reached.
    case locationServiceFailure = 204
    /// The enrollment endpoint could not be reached.
    case enrollmentEndPointNetworkFailure = 205
    /// The service's response could not be parsed.
    case parsingFailure = 206
    /// No (or the empty) account was given.
    case nilAccount = 207
    /// The account is enrolled already.
    case alreadyEnrolled = 208
    /// The account is not one the app may enroll (not in `allowedAccounts`); remove it.
    case notEmmAccount = 209
    /// The device is managed under a different account; remove this one.
    case mdmEnrolledDifferentUser = 210
    /// The account does not match the device account; remove it.
    case notDeviceAccount = 211
    /// The policy endpoint could not be reached.
    case policyEndPointNetworkFailure = 212
    /// No account is enrolled.
    case appNotEnrolled = 213
    /// The account is not the enrolled account.
    case notEnrolledAccount = 214
    /// The account's data could not be cleared.
    case failedToClearMamData = 215
    /// The operation timed out.
    case timeout = 216
    /// The token library failed.
    case adalInternalError = 217
    /// The existing enrolled account will be removed first.
    case switchExistingAccount = 218
    /// The user canceled the login.
    case loginCanceled = 219
    /// The service no longer has a policy record for the account.
    case policyRecordGone = 220
    /// Re-enrollment is possible only while the same account is still enrolled.
    case reEnrollForUnenrolledUser = 221
    /// The tenant is migrating, or the account is not licensed.
    case tenantMigration = 222
    /// The operation is not supported here.
    case unsupportedAPI = 223
    /// The linked token library does not support this method.
    case adalMethodUnsupported = 224
    /// The account is licensed but not targeted with a policy.
    case licensedNotTargeted = 225
    /// The device blocked the enrollment.
    case deviceBlockedEnrollment = 226
    /// As many accounts as ``RuntimeSettings/maxManagedAccounts`` allows are managed already (with a limit of 1:
    /// another account is managed).
    case singleManagedAccountMode = 227

    /// Whether the code is a success code (1xx).
    public var isSuccess: Bool { rawValue < 200 }

    /// Failure codes after which the app should remove the account: no retry.
    public var requiresAccountRemoval: Bool {
        self == .notEmmAccount || self == .mdmEnrolledDifferentUser || self == .notDeviceAccount
    }

    /// Whether the enrollment manager retries after this failure (on ``RuntimeSettings/enrollmentRetryInterval``).
    /// Transient failures are retried; failures that repeating cannot fix are not.
    public var isRetryable: Bool {
        guard !isSuccess, !requiresAccountRemoval else { return false }
        switch self {
        case .nilAccount, .alreadyEnrolled, .loginCanceled, .unsupportedAPI, .adalMethodUnsupported,
            .singleManagedAccountMode, .reEnrollForUnenrolledUser, .switchExistingAccount, .appNotEnrolled,
            .notEnrolledAccount:
            return false
        default:
            return true
        }
    }
}
