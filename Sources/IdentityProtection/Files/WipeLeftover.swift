import IdentityRuntime

/// Something a wipe was asked to remove and could not, or a place under the roots it could not look into
/// (which may hold such data): its path and why.
///
/// A wipe goes on past each of them, lists every one in its report (`PolicyManager`'s `WipeReport` and
/// `TenantWipeReport`), and never reports success while one remains. The accounts it was wiping stay in
/// the wipe journal, so the next wipe of them, or the next ``FileProtectionManager`` made on the same state
/// directory, tries again.
public struct WipeLeftover: Sendable, Equatable, CustomStringConvertible {
    /// The absolute path: a file that could not be removed, or a directory that could not be read.
    public var path: String
    /// The account the file belongs to, when the wipe could read it (`nil` for a directory it could not
    /// list, or a file whose owner it could not read).
    public var owner: Identity?
    /// Why: the operating system's refusal (``ProtectionError/ioFailure(path:operation:errno:)`` (106)) or
    /// an owner record that could not be read.
    public var error: ProtectionError

    /// A leftover at `path`, of `owner` when known, for `error`.
    public init(path: String, owner: Identity?, error: ProtectionError) {
        self.path = path
        self.owner = owner
        self.error = error
    }

    public var description: String {
        "\(path)\(owner.map { " (\($0.name))" } ?? ""): \(error)"
    }
}

/// What the file part of a wipe did: the files it removed by owner, what it could not remove, and its first
/// failure (`nil`: everything it was asked to remove is gone, and the keys are destroyed).
package struct FileWipeOutcome: Sendable {
    package var removed: [Identity: [String]] = [:]
    package var leftovers: [WipeLeftover] = []
    /// The accounts whose keys the key store did not destroy.
    package var keyFailures: [Identity: ProtectionError] = [:]
    package var error: ProtectionError?

    package init(
        removed: [Identity: [String]] = [:], leftovers: [WipeLeftover] = [], keyFailures: [Identity: ProtectionError] = [:],
        error: ProtectionError? = nil
    ) {
        self.removed = removed
        self.leftovers = leftovers
        self.keyFailures = keyFailures
        self.error = error
    }
}
