/// How an identity switch ended. Raw values are those of the Intune App SDK's `IntuneMAMSwitchIdentityResult`.
public enum SwitchIdentityResult: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The switch happened: the window's UI identity is now the requested one.
    case success = 0
    /// A conditional-launch check or the user canceled, or a newer call for the same window superseded this one.
    case canceled = 1
    /// The switch is not allowed: a managed identity other than the primary user, or a conflicting thread
    /// identity on the main thread.
    case notAllowed = 2
    /// A check failed, no delegate answered, or the delegate did not answer in time.
    case failed = 3

    public var description: String {
        switch self {
        case .success: "success"
        case .canceled: "canceled"
        case .notAllowed: "notAllowed"
        case .failed: "failed"
        }
    }
}
