import IdentityPolicy
import IdentityRuntime

/// The organizations and accounts of the example: 8 tenants (`t0.example` … `t7.example`) of 8 accounts each
/// (`u0@t0.example` … `u7@t7.example`), 64 in all.
///
/// Policies, one per tenant: even tenants encrypt files at rest and allow "Save as…" to OneDrive for Business
/// and SharePoint; odd tenants keep files in the clear and allow OneDrive for Business and the local drive.
/// Every tenant shares data within the tenant only (`dataTransfer: sameTenant`).
public enum Tenants {
    public static let tenantCount = 8
    public static let accountsPerTenant = 8

    public static func tenant(_ index: Int) -> TenantID { TenantID("t\(index).example") }

    public static func account(tenant: Int, user: Int) -> Identity { Identity("u\(user)@t\(tenant).example") }

    /// Every account, tenant by tenant.
    public static let accounts: [Identity] = (0..<tenantCount).flatMap { tenant in
        (0..<accountsPerTenant).map { account(tenant: tenant, user: $0) }
    }

    public static func encryptsFiles(tenant: Int) -> Bool { tenant.isMultiple(of: 2) }

    public static func policy(tenant: Int) -> Policy {
        Policy(
            identity: nil, isRestricted: true,
            allowedSaveLocations: encryptsFiles(tenant: tenant) ? [.oneDriveForBusiness, .sharePoint] : [.oneDriveForBusiness, .localDrive],
            isFileEncryptionRequired: encryptsFiles(tenant: tenant), dataTransfer: .sameTenant)
    }

    /// A `PolicyManager` as each service of the example has its own: data isolation on, the tenants' policies,
    /// every account registered.
    public static func policyManager() -> PolicyManager {
        var tenantPolicies: [TenantID: Policy] = [:]
        for index in 0..<tenantCount { tenantPolicies[tenant(index)] = policy(tenant: index) }
        var settings = RuntimeSettings()
        settings.dataIsolation = true
        let manager = PolicyManager(settings: settings, policySource: StaticPolicySource(tenants: tenantPolicies))
        for account in accounts { manager.registerAccount(account) }
        return manager
    }

    /// The tenant index of one of this example's accounts (from `t<N>.example`), or `nil`.
    public static func tenantIndex(of account: Identity) -> Int? {
        guard let at = account.name.lastIndex(of: "@") else { return nil }
        let domain = account.name[account.name.index(after: at)...]
        guard domain.hasPrefix("t"), domain.hasSuffix(".example") else { return nil }
        return Int(domain.dropFirst().dropLast(".example".count))
    }
}

/// The "Save as…" destinations the export endpoint knows, by the name used in `?to=`.
public enum ExportTarget: String, Sendable, CaseIterable {
    case onedrive, sharepoint, dropbox, local

    public var location: SaveLocation {
        switch self {
        case .onedrive: .oneDriveForBusiness
        case .sharepoint: .sharePoint
        case .dropbox: .dropbox
        case .local: .localDrive
        }
    }
}
