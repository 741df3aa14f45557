/// Where data may be saved to: the bit values of the Intune App SDK's `IntuneMAMSaveLocation`.
///
/// The empty set is `IntuneMAMSaveLocationOther` (`0`): a location the app cannot classify. See
/// ``Policy/isSaveToAllowed(for:account:)`` for the rules.
public struct SaveLocation: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// An unknown location (`0`, the empty set).
    public static let other: SaveLocation = []
    /// OneDrive for Business (`1 << 0`).
    public static let oneDriveForBusiness = SaveLocation(rawValue: 1 << 0)
    /// SharePoint (`1 << 1`).
    public static let sharePoint = SaveLocation(rawValue: 1 << 1)
    /// Box (`1 << 2`).
    public static let box = SaveLocation(rawValue: 1 << 2)
    /// Dropbox (`1 << 3`).
    public static let dropbox = SaveLocation(rawValue: 1 << 3)
    /// Google Drive (`1 << 4`).
    public static let googleDrive = SaveLocation(rawValue: 1 << 4)
    /// Storage on the device (or, for a service, the local file system).
    public static let localDrive = SaveLocation(rawValue: 1 << 5)
    /// The photo library.
    public static let cameraRoll = SaveLocation(rawValue: 1 << 6)
    /// A location not listed here, accessed with an account: allowed only for the managed account.
    public static let accountDocument = SaveLocation(rawValue: 1 << 7)
    /// iManage (`1 << 8`).
    public static let iManage = SaveLocation(rawValue: 1 << 8)
    /// Egnyte (`1 << 9`).
    public static let egnyte = SaveLocation(rawValue: 1 << 9)

    /// Every named location.
    public static let all: SaveLocation = [
        .oneDriveForBusiness, .sharePoint, .box, .dropbox, .googleDrive, .localDrive, .cameraRoll, .accountDocument,
        .iManage, .egnyte,
    ]

    /// Locations that need no account (the account argument is ignored for them).
    public static let accountless: SaveLocation = [.localDrive, .cameraRoll]

    /// The names used in policy documents.
    public static let names: [(String, SaveLocation)] = [
        ("oneDriveForBusiness", .oneDriveForBusiness), ("sharePoint", .sharePoint), ("box", .box),
        ("dropbox", .dropbox), ("googleDrive", .googleDrive), ("localDrive", .localDrive),
        ("cameraRoll", .cameraRoll), ("accountDocument", .accountDocument), ("iManage", .iManage),
        ("egnyte", .egnyte),
    ]
}
