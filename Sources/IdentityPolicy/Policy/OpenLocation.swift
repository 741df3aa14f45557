/// Where data may be opened from: the bit values of the Intune App SDK's `IntuneMAMOpenLocation`.
///
/// The empty set is `IntuneMAMOpenLocationOther` (`0`): a location the app cannot classify. See
/// ``Policy/isOpenFromAllowed(for:account:)`` for the rules.
public struct OpenLocation: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// An unknown location (`0`, the empty set).
    public static let other: OpenLocation = []
    /// OneDrive for Business (`1 << 0`).
    public static let oneDriveForBusiness = OpenLocation(rawValue: 1 << 0)
    /// SharePoint (`1 << 1`).
    public static let sharePoint = OpenLocation(rawValue: 1 << 1)
    /// The camera (`1 << 2`).
    public static let camera = OpenLocation(rawValue: 1 << 2)
    /// Storage on the device, or a service's local file system (`1 << 3`).
    public static let localStorage = OpenLocation(rawValue: 1 << 3)
    /// The photo library (`1 << 4`).
    public static let photos = OpenLocation(rawValue: 1 << 4)
    /// A document that has a managed account's identity, or an unlisted location accessed with an account:
    /// allowed only for the managed account.
    public static let accountDocument = OpenLocation(rawValue: 1 << 5)
    /// Box (`1 << 6`).
    public static let box = OpenLocation(rawValue: 1 << 6)
    /// iManage (`1 << 7`).
    public static let iManage = OpenLocation(rawValue: 1 << 7)
    /// Egnyte (`1 << 8`).
    public static let egnyte = OpenLocation(rawValue: 1 << 8)

    /// Every named location.
    public static let all: OpenLocation = [
        .oneDriveForBusiness, .sharePoint, .camera, .localStorage, .photos, .accountDocument, .box, .iManage, .egnyte,
    ]

    /// Locations that need no account (the account argument is ignored for them).
    public static let accountless: OpenLocation = [.camera, .localStorage, .photos]

    /// The names used in policy documents.
    public static let names: [(String, OpenLocation)] = [
        ("oneDriveForBusiness", .oneDriveForBusiness), ("sharePoint", .sharePoint), ("camera", .camera),
        ("localStorage", .localStorage), ("photos", .photos), ("accountDocument", .accountDocument), ("box", .box),
        ("iManage", .iManage), ("egnyte", .egnyte),
    ]
}
