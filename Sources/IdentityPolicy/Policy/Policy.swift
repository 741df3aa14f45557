import IdentityRuntime

/// The app-protection policy in force for one identity (the analog of `IntuneMAMPolicy`).
///
/// "No identity" and unmanaged accounts get ``unrestricted``: everything allowed. A managed account gets the
/// policy of its policy document.
///
/// ```swift
/// let policy = manager.policy(for: "alice@contoso.com")
/// if policy.isSaveToAllowed(for: .oneDriveForBusiness, account: "alice@contoso.com") { showSaveButton() }
/// ```
public struct Policy: Sendable, Hashable {
    /// The account this policy applies to; `nil` for the unrestricted policy.
    public var identity: Identity?
    /// Whether any restriction applies. `false` only for ``unrestricted``.
    public var isRestricted: Bool
    /// Locations managed data may be saved to.
    public var allowedSaveLocations: SaveLocation
    /// Locations data may be opened from into the managed context.
    public var allowedOpenLocations: OpenLocation
    /// Whether saving to a location the app cannot classify (``SaveLocation/other``) is allowed.
    public var isSaveToUnknownLocationAllowed: Bool
    /// Whether opening from a location the app cannot classify (``OpenLocation/other``) is allowed.
    public var isOpenFromUnknownLocationAllowed: Bool
    /// Whether the managed account's files must be encrypted at rest (drives `IdentityProtection`).
    public var isFileEncryptionRequired: Bool
    /// What notifications for the account may show.
    public var notificationPolicy: NotificationPolicy
    /// Whether managed data may be shared with other apps (share sheets, pasteboards, pipes to other tools).
    public var isAppSharingAllowed: Bool
    /// Whether a PIN is required before the account's data is shown (apps implement it as a
    /// ``ConditionalLaunchCheck``).
    public var isPINRequired: Bool
    /// Per-identity app configuration: the values an administrator set for this app.
    public var appConfiguration: [String: JSONValue]

    /// A policy with every field given.
    public init(
        identity: Identity?, isRestricted: Bool = true, allowedSaveLocations: SaveLocation = [],
        allowedOpenLocations: OpenLocation = [], isSaveToUnknownLocationAllowed: Bool = false,
        isOpenFromUnknownLocationAllowed: Bool = false, isFileEncryptionRequired: Bool = true,
        notificationPolicy: NotificationPolicy = .allow, isAppSharingAllowed: Bool = false,
        isPINRequired: Bool = false, appConfiguration: [String: JSONValue] = [:]
    ) {
        self.identity = identity
        self.isRestricted = isRestricted
        self.allowedSaveLocations = allowedSaveLocations
        self.allowedOpenLocations = allowedOpenLocations
        self.isSaveToUnknownLocationAllowed = isSaveToUnknownLocationAllowed
        self.isOpenFromUnknownLocationAllowed = isOpenFromUnknownLocationAllowed
        self.isFileEncryptionRequired = isFileEncryptionRequired
        self.notificationPolicy = notificationPolicy
        self.isAppSharingAllowed = isAppSharingAllowed
        self.isPINRequired = isPINRequired
        self.appConfiguration = appConfiguration
    }

    /// No restrictions: for "no identity", unmanaged accounts and managed accounts without a policy (unless
    /// ``RuntimeSettings/policyRequired``).
    public static let unrestricted = Policy(
        identity: nil, isRestricted: false, allowedSaveLocations: .all, allowedOpenLocations: .all,
        isSaveToUnknownLocationAllowed: true, isOpenFromUnknownLocationAllowed: true,
        isFileEncryptionRequired: false, notificationPolicy: .allow, isAppSharingAllowed: true)

    /// Everything blocked: for a managed account without a policy when a policy is required, so that a missing
    /// policy never means an open one.
    public static func locked(for identity: Identity) -> Policy {
        Policy(identity: identity, notificationPolicy: .block)
    }

    /// Whether managed data may be saved to `location` under `account` (`nil`: the account is unknown).
    ///
    /// Rules, for a restricted policy:
    /// - ``SaveLocation/other`` (the empty set): ``isSaveToUnknownLocationAllowed``.
    /// - Several bits: allowed only when every bit is.
    /// - ``SaveLocation/accountDocument``: allowed exactly when `account` is this policy's (managed) account;
    ///   the data stays in the organization's storage.
    /// - Other account-bound locations (OneDrive, SharePoint, Box, Dropbox, Google Drive, iManage, Egnyte):
    ///   allowed when the location is in ``allowedSaveLocations`` and `account` is the managed account. An
    ///   unknown (`nil`) or other account is refused: org data must not go to a personal cloud.
    /// - ``SaveLocation/localDrive`` and ``SaveLocation/cameraRoll``: allowed when in ``allowedSaveLocations``;
    ///   `account` is ignored.
    /// - Bits outside ``SaveLocation/all`` (from a newer SDK) are treated as unknown locations.
    public func isSaveToAllowed(for location: SaveLocation, account: Identity? = nil) -> Bool {
        isTransferAllowed(
            location, account: account, allowed: allowedSaveLocations,
            unknownAllowed: isSaveToUnknownLocationAllowed)
    }

    /// Whether data from `location` under `account` (`nil`: unknown) may be opened into the managed context.
    /// The same rules as ``isSaveToAllowed(for:account:)``, with ``OpenLocation/camera``,
    /// ``OpenLocation/localStorage`` and ``OpenLocation/photos`` as the locations without an account.
    public func isOpenFromAllowed(for location: OpenLocation, account: Identity? = nil) -> Bool {
        isTransferAllowed(
            location, account: account, allowed: allowedOpenLocations,
            unknownAllowed: isOpenFromUnknownLocationAllowed)
    }

    /// The one rule behind save-to and open-from (documented on ``isSaveToAllowed(for:account:)``).
    private func isTransferAllowed<Location: PolicyLocation>(
        _ location: Location, account: Identity?, allowed: Location, unknownAllowed: Bool
    ) -> Bool {
        guard isRestricted else { return true }
        guard location != .other else { return unknownAllowed }
        if !location.subtracting(.all).isEmpty, !unknownAllowed { return false }
        let known = location.intersection(.all)
        let isManagedAccount = account.map { !$0.isUnmanaged && $0 == identity } ?? false
        if known.contains(.accountDocument), !isManagedAccount { return false }
        let listed = known.subtracting(.accountDocument)
        guard allowed.isSuperset(of: listed) else { return false }
        if !listed.subtracting(.accountless).isEmpty, !isManagedAccount { return false }
        return true
    }

    /// The app configuration value for `key`, if the administrator set one.
    public func appConfigurationValue(forKey key: String) -> JSONValue? {
        appConfiguration[key]
    }
}
