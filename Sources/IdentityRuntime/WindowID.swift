/// Names a window or scene whose UI identity is tracked separately.
///
/// APIs take `WindowID?`; `nil` means the key window (``IdentityContext/keyWindow``). A program with one
/// window never needs anything but `nil`, which resolves to ``main`` until another key window is set.
public struct WindowID: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The window an app has before it sets another key window.
    public static let main = WindowID("main")

    /// The app's own name for the window (a scene session identifier, for example).
    public let rawValue: String
    /// `rawValue.hashValue`, computed once: windows key the UI-identity tables, which every switch looks up.
    private let rawValueHash: Int

    /// The window named `rawValue`.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
        rawValueHash = rawValue.hashValue
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    public var description: String { rawValue }

    /// Equal when the raw values are; windows whose cached hashes differ are told apart without comparing
    /// strings.
    public static func == (lhs: WindowID, rhs: WindowID) -> Bool {
        lhs.rawValueHash == rhs.rawValueHash && lhs.rawValue == rhs.rawValue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(rawValueHash)
    }
}
