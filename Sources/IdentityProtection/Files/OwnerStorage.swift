/// Where ``FileProtectionManager`` records file owners.
public enum OwnerStorage: Sendable, Hashable {
    /// The `user.identityruntime.owner` extended attribute where the file system supports user extended
    /// attributes (ext4, XFS, Btrfs, tmpfs on Linux 6.6+, APFS); the crash-safe index for files on file
    /// systems that do not. The attribute moves with the file on every rename.
    case automatic
    /// Only the index (a file in the manager's state directory, keyed by device and inode, so it survives
    /// renames within a file system).
    case indexOnly
}
