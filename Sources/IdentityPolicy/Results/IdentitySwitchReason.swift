/// Why the runtime asks the app to switch identities. Raw values are those of the Intune App SDK's
/// `IntuneMAMIdentitySwitchReason`.
public enum IdentitySwitchReason: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A URL owned by another account is being opened.
    case openURL = 0
    /// The user canceled a conditional-launch check; the app should switch to another account.
    case cancelConditionalLaunch = 1
    /// A document owned by another account is being imported.
    case documentImport = 2

    public var description: String {
        switch self {
        case .openURL: "openURL"
        case .cancelConditionalLaunch: "cancelConditionalLaunch"
        case .documentImport: "documentImport"
        }
    }
}
