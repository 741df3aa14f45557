/// How an `addIdentity` request ended. Raw values are those of the Intune App SDK's
/// `IntuneMAMAddIdentityResult`.
public enum AddIdentityResult: Int, Sendable, Hashable, CaseIterable {
    /// The app added (signed in) the account.
    case success = 0
    /// The app could not add the account, or did not answer.
    case failed = 1
}
