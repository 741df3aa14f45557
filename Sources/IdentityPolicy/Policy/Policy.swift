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
    /// Per-identity app configuration: the values an administrator set for this app. In a combined policy,
    /// the keys every account agrees on (keys whose values differ are in ``appConfigurationConflicts``).
    public var appConfiguration: [String: AppConfigurationValue]
    /// Whether the policy blocks the account (``BlockAccountReason/blockedByPolicy``): its data is refused
    /// and a switch to it is not allowed while this is set.
    public var isAccountBlocked: Bool
    /// Which other accounts may receive or read the account's data (``PolicyManager/isDataTransferAllowed(from:to:)``).
    public var dataTransfer: DataTransferLevel
    /// For a policy combining several managed accounts (``PolicyManager/policy(for:)-(Collection<Identity>)``): those
    /// accounts, sorted. Empty for one account's own policy.
    public var combinedAccounts: [Identity]
    /// For a combined policy: the app-configuration keys the accounts set to different values, sorted by key.
    /// None of them is in ``appConfiguration``: a conflict is reported, never silently resolved.
    public var appConfigurationConflicts: [AppConfigurationConflict]

    /// A policy with every field given.
    public init(
        identity: Identity?, isRestricted: Bool = true, allowedSaveLocations: SaveLocation = [],
        allowedOpenLocations: OpenLocation = [], isSaveToUnknownLocationAllowed: Bool = false,
        isOpenFromUnknownLocationAllowed: Bool = false, isFileEncryptionRequired: Bool = true,
        notificationPolicy: NotificationPolicy = .allow, isAppSharingAllowed: Bool = false,
        isPINRequired: Bool = false, appConfiguration: [String: AppConfigurationValue] = [:], isAccountBlocked: Bool = false,
        dataTransfer: DataTransferLevel = .sameTenant
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
        self.isAccountBlocked = isAccountBlocked
        self.dataTransfer = dataTransfer
        self.combinedAccounts = []
        self.appConfigurationConflicts = []
    }

    /// No restrictions: for "no identity", unmanaged accounts and managed accounts without a policy (unless
    /// ``RuntimeSettings/policyRequired``).
    public static let unrestricted = Policy(
        identity: nil, isRestricted: false, allowedSaveLocations: .all, allowedOpenLocations: .all,
        isSaveToUnknownLocationAllowed: true, isOpenFromUnknownLocationAllowed: true,
        isFileEncryptionRequired: false, notificationPolicy: .allow, isAppSharingAllowed: true, dataTransfer: .any)

    /// Everything blocked: for a managed account without a policy when a policy is required, so that a missing
    /// policy never means an open one.
    public static func locked(for identity: Identity) -> Policy {
        Policy(identity: identity, notificationPolicy: .block, dataTransfer: .none)
    }

    /// Whether managed data may be saved to `location` under `account` (`nil`: the account is unknown).
    ///
    /// Rules, for a restricted policy:
    /// - ``SaveLocation/other`` (the empty set): ``isSaveToUnknownLocationAllowed``.
    /// - Several bits: allowed only when every bit is.
    /// - ``SaveLocation/accountDocument``: allowed exactly when `account` is this policy's (managed) account;
    ///   the data stays in the organization's storage. A policy combining several accounts has no single
    ///   account, so account-bound locations are refused: data of two organizations goes to neither's storage.
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
        let isManagedAccount = combinedAccounts.isEmpty && (account.map { !$0.isUnmanaged && $0 == identity } ?? false)
        if known.contains(.accountDocument), !isManagedAccount { return false }
        let listed = known.subtracting(.accountDocument)
        guard allowed.isSuperset(of: listed) else { return false }
        if !listed.subtracting(.accountless).isEmpty, !isManagedAccount { return false }
        return true
    }

    /// The app configuration value for `key`, if the administrator set one (and, in a combined policy, every
    /// account that set it agrees on it).
    public func appConfigurationValue(forKey key: String) -> AppConfigurationValue? {
        appConfiguration[key]
    }
}

/// An app-configuration key that the accounts of a combined policy set to different values.
public struct AppConfigurationConflict: Sendable, Hashable, CustomStringConvertible {
    /// The key.
    public var key: String
    /// Each account's value, for the accounts that set the key.
    public var values: [Identity: AppConfigurationValue]

    /// A conflict over `key` between the accounts' `values`.
    public init(key: String, values: [Identity: AppConfigurationValue]) {
        self.key = key
        self.values = values
    }

    public var description: String {
        let listed = values.sorted { $0.key.foldedName < $1.key.foldedName }.map { "\($0.key.name)=\($0.value)" }
        return "\(key): " + listed.joined(separator: ", ")
    }
}

extension Policy {
    /// The most restrictive combination of `policies` (<doc:AccountsAndPolicies>), for data or a view that belongs to several
    /// accounts at once:
    /// - a location is allowed only where every policy allows it (account-bound locations only when a single
    ///   account remains), and an unknown location only when every policy allows it;
    /// - encryption, a PIN and the account block are required if any policy requires them; data goes only
    ///   where every policy lets it go (the lowest ``DataTransferLevel``);
    /// - the strictest notification policy wins; app sharing only if every policy allows it;
    /// - app-configuration keys are kept where the accounts agree, and reported in
    ///   ``appConfigurationConflicts`` where they differ.
    ///
    /// Unrestricted policies (no identity, unmanaged accounts) add no restriction. Combining no restricted
    /// policy gives ``unrestricted``; combining one gives that policy.
    public static func combining(_ policies: some Sequence<Policy>) -> Policy {
        var restricted: [Policy] = []
        for policy in policies where policy.isRestricted {
            if !restricted.contains(policy) { restricted.append(policy) }
        }
        guard var combined = restricted.first else { return .unrestricted }
        guard restricted.count > 1 else { return combined }
        var accounts = Set(combined.combinedAccounts.isEmpty ? combined.identity.map { [$0] } ?? [] : combined.combinedAccounts)
        var settings: [String: [Identity: AppConfigurationValue]] = [:]
        var unattributed: [String: AppConfigurationValue] = [:]
        for policy in restricted {
            for (key, value) in policy.appConfiguration {
                if let identity = policy.identity { settings[key, default: [:]][identity] = value } else { unattributed[key] = value }
            }
        }
        for policy in restricted.dropFirst() {
            if policy.combinedAccounts.isEmpty {
                if let identity = policy.identity { accounts.insert(identity) }
            } else {
                accounts.formUnion(policy.combinedAccounts)
            }
            combined.allowedSaveLocations.formIntersection(policy.allowedSaveLocations)
            combined.allowedOpenLocations.formIntersection(policy.allowedOpenLocations)
            combined.isSaveToUnknownLocationAllowed = combined.isSaveToUnknownLocationAllowed && policy.isSaveToUnknownLocationAllowed
            combined.isOpenFromUnknownLocationAllowed = combined.isOpenFromUnknownLocationAllowed && policy.isOpenFromUnknownLocationAllowed
            combined.isFileEncryptionRequired = combined.isFileEncryptionRequired || policy.isFileEncryptionRequired
            combined.notificationPolicy = max(combined.notificationPolicy, policy.notificationPolicy)
            combined.isAppSharingAllowed = combined.isAppSharingAllowed && policy.isAppSharingAllowed
            combined.isPINRequired = combined.isPINRequired || policy.isPINRequired
            combined.isAccountBlocked = combined.isAccountBlocked || policy.isAccountBlocked
            combined.dataTransfer = min(combined.dataTransfer, policy.dataTransfer)
            combined.appConfigurationConflicts.append(contentsOf: policy.appConfigurationConflicts)
        }
        combined.appConfiguration = [:]
        var conflicts = combined.appConfigurationConflicts
        let conflictingKeys = Set(conflicts.map(\.key))
        for key in Set(settings.keys).union(unattributed.keys) where !conflictingKeys.contains(key) {
            let values = settings[key] ?? [:]
            let distinct = Set(values.values).union(unattributed[key].map { [$0] } ?? [])
            if distinct.count == 1, let value = distinct.first {
                combined.appConfiguration[key] = value
            } else {
                conflicts.append(AppConfigurationConflict(key: key, values: values))
            }
        }
        combined.appConfigurationConflicts = conflicts.sorted { $0.key < $1.key }
        combined.combinedAccounts = accounts.sorted { $0.foldedName < $1.foldedName }
        combined.identity = combined.combinedAccounts.count == 1 ? combined.combinedAccounts[0] : nil
        if combined.combinedAccounts.count == 1 { combined.combinedAccounts = [] }
        return combined
    }
}
