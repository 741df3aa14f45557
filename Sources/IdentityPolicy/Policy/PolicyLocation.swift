/// What ``SaveLocation`` and ``OpenLocation`` have in common, so one rule decides both directions.
public protocol PolicyLocation: OptionSet, Sendable where Element == Self, RawValue == Int {
    /// An unknown location (no bit set).
    static var other: Self { get }
    /// Every location this SDK version knows.
    static var all: Self { get }
    /// The organization's own storage for the managed account.
    static var accountDocument: Self { get }
    /// Locations that belong to no account (the device's own storage, camera, photos).
    static var accountless: Self { get }
}

extension SaveLocation: PolicyLocation {}
extension OpenLocation: PolicyLocation {}
