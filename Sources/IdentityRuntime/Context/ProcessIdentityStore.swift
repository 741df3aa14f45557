import Synchronization

/// The process identity, readable without a lock: an atomic pointer to an immutable box.
///
/// Readers load the pointer (acquiring) and read the box; nothing is ever freed under them because every
/// box stays alive for the life of the process, interned by name, so setting the same account again reuses
/// its box. Memory is therefore bounded by the number of distinct names ever made the process identity (a
/// handful of accounts), not by how often it is set. Writers take a lock only to intern.
enum ProcessIdentityStore {
    private final class Box: Sendable {
        let identity: Identity
        init(_ identity: Identity) { self.identity = identity }
    }

    /// The current box's address (an unretained `Unmanaged<Box>`: boxes are immortal), or 0.
    private static let current = Atomic<UInt>(0)
    /// Every box ever published, by exact name; never shrinks.
    private static let interned = LockedValue<[String: Box]>([:])

    static var identity: Identity? {
        guard let pointer = UnsafeRawPointer(bitPattern: current.load(ordering: .acquiring)) else { return nil }
        return Unmanaged<Box>.fromOpaque(pointer).takeUnretainedValue().identity
    }

    static func set(_ identity: Identity?) {
        interned.withLock { table in
            guard let identity else {
                current.store(0, ordering: .releasing)
                return
            }
            let box: Box
            if let existing = table[identity.name] {
                box = existing
            } else {
                box = Box(identity)
                table[identity.name] = box
            }
            // Stored under the lock, so concurrent setters publish in the order they took it.
            current.store(UInt(bitPattern: Unmanaged.passUnretained(box).toOpaque()), ordering: .releasing)
        }
    }
}
