/// How ``FileProtectionManager/openFile(atPath:options:permissions:)`` opens a file (the `open(2)` flags it
/// passes, plus the owner rule).
public struct FileOpenOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Open for reading (`O_RDONLY`, or `O_RDWR` with ``write``).
    public static let read = FileOpenOptions(rawValue: 1 << 0)
    /// Open for writing (`O_WRONLY`, or `O_RDWR` with ``read``).
    public static let write = FileOpenOptions(rawValue: 1 << 1)
    /// Create the file when missing (`O_CREAT`); a created file gets an owner.
    public static let create = FileOpenOptions(rawValue: 1 << 2)
    /// Truncate the file (`O_TRUNC`); a truncated file gets an owner. Implies ``write``.
    public static let truncate = FileOpenOptions(rawValue: 1 << 3)
    /// Fail when the file exists (`O_EXCL`, with ``create``).
    public static let exclusive = FileOpenOptions(rawValue: 1 << 4)
    /// Every write appends (`O_APPEND`).
    public static let append = FileOpenOptions(rawValue: 1 << 5)
}
