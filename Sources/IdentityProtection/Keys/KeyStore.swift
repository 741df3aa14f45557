import IdentityRuntime

/// Where the keys of managed identities live. Each identity has any number of keys, one of them current;
/// data records the id of the key it was encrypted with, so keys rotate while old data stays readable.
///
/// Implementations must be thread-safe. ``FileKeyStore`` is the default; an app can supply one backed by the
/// platform keychain, a hardware module or a database.
///
/// Every operation comes twice:
/// - **Synchronous** (``currentKey(for:)``...), for GCD blocks and operations. A store that is local answers
///   here. A store that reaches a database or a network answers from its cache and, on a miss, through
///   `StoreBridge.wait(for:operation:timeout:timedOut:_:)`, which blocks only threads that may block and never
///   blocks the asynchronous entry points of the managers.
/// - **Asynchronous** (``currentKey(for:deadline:)``...), for Swift concurrency. The default implementations
///   call the synchronous ones, which is right for a local store (``FileKeyStore`` answers without
///   suspending). A remote store implements them with its client's asynchronous API and returns or throws by
///   `deadline`, whatever it waits on (a query, a reconnect, a retry).
///
/// Destroying an identity's keys (``destroyKeys(for:)``) is crypto-shredding: everything encrypted for it
/// becomes unreadable (``ProtectionError/keyNotFound(identity:keyID:)``), wherever copies of it are. Open
/// ``ProtectedFile`` handles hold their key: they stop when the keys are destroyed through a wipe
/// (``FileProtectionManager/removeFiles(ownedBy:)``, `PolicyManager.wipeData(forAccount:)`) or through
/// ``FileKeyStore/destroyKeys(for:)`` (which also stops the handles opened through a store that wraps the
/// `FileKeyStore`: it revokes the destroyed keys by their ids, as long as the wrapper hands out the
/// ``ProtectionKey`` values the `FileKeyStore` returned, not keys rebuilt from their id and material); destroy
/// the keys of another store through a wipe for the same effect.
///
/// A store that keeps its keys in files names their directories in ``keyDirectories``: no
/// ``FileProtectionManager`` made with the store reads or writes a path in them through its file APIs
/// (``ProtectionError/reservedPath(path:)`` (116)). The directories of every ``FileKeyStore`` in the process
/// are reserved in any case, also when the manager's store is a wrapper that does not forward them.
///
/// A store that cannot answer refuses: ``ProtectionError/keyStoreUnavailable(reason:)``, never a key it is not
/// sure of and never ``ProtectionError/keyNotFound(identity:keyID:)`` for a key it could not look up.
public protocol KeyStore: Sendable {
    /// The key new data for `identity` is encrypted with, created (and persisted) when it has none.
    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey

    /// The key of `identity` with id `id`, current or retired.
    /// - Throws: ``ProtectionError/keyNotFound(identity:keyID:)`` when there is no such key.
    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey

    /// Makes a new current key for `identity`; older keys stay available for reading.
    @discardableResult
    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey

    /// Destroys every key of `identity`. Succeeds when it has none.
    func destroyKeys(for identity: Identity) throws(ProtectionError)

    /// The directories the store keeps key files in; the default implementation returns none. A
    /// ``FileProtectionManager`` refuses every path in them (links resolved) with
    /// ``ProtectionError/reservedPath(path:)`` (116), so that no caller reads or replaces a key through the
    /// file APIs. Read once, when the manager is made. A store that wraps another returns the inner store's.
    var keyDirectories: [String] { get }

    /// Every identity the store holds a key of, and what it could not read, or `nil` when the store cannot
    /// list them (the default implementation). A wipe of a tenant (`PolicyManager.wipeData(forTenant:)`) asks
    /// its file manager's store and the policy manager's own, so that an account of the tenant the manager does not know, which owns nothing
    /// under the roots but has keys (envelopes of ``DataProtectionManager``, files elsewhere), is found and its
    /// keys destroyed; what the store could not read makes the tenant's wipe incomplete. A store that wraps
    /// another returns the inner store's.
    /// - Throws: when the store cannot list at all: the tenant's wipe reports it and is not complete.
    func identitiesWithKeys() throws(ProtectionError) -> KeyListing?

    /// ``currentKey(for:)``, answered by `deadline` (a store that waits on nothing may ignore it).
    func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey

    /// ``key(withID:for:)``, answered by `deadline`.
    func key(withID id: ProtectionKeyID, for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey

    /// ``rotateKey(for:)``, answered by `deadline`.
    @discardableResult
    func rotateKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey

    /// ``destroyKeys(for:)``, answered by `deadline`.
    func destroyKeys(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError)
}

extension KeyStore {
    /// None: a store that keeps no key files of its own (the ``FileKeyStore`` a wrapper reaches is reserved
    /// anyway).
    public var keyDirectories: [String] { [] }

    /// `nil`: the store cannot list the identities it holds keys of.
    public func identitiesWithKeys() throws(ProtectionError) -> KeyListing? { nil }

    public func currentKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try currentKey(for: identity)
    }

    public func key(withID id: ProtectionKeyID, for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try key(withID: id, for: identity)
    }

    @discardableResult
    public func rotateKey(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) -> ProtectionKey {
        try rotateKey(for: identity)
    }

    public func destroyKeys(for identity: Identity, deadline: ContinuousClock.Instant) async throws(ProtectionError) {
        try destroyKeys(for: identity)
    }
}

/// What ``KeyStore/identitiesWithKeys()`` found.
public struct KeyListing: Sendable, Equatable {
    /// Every identity the store holds a key of, among the keys it could read.
    public var identities: Set<Identity>
    /// What the store could not read (for a ``FileKeyStore``, a key file that does not parse or is not named
    /// after the identity it holds), with the reason: whose keys it holds is unknown.
    public var unreadable: [WipeLeftover]

    /// A listing of `identities`, with `unreadable` entries.
    public init(identities: Set<Identity>, unreadable: [WipeLeftover] = []) {
        self.identities = identities
        self.unreadable = unreadable
    }
}

extension KeyStore {
    /// ``identitiesWithKeys()`` with a failure to list at all reported as an unreadable entry, at the store's
    /// first key directory (`<key store>` for a store without one); an empty listing when the store cannot
    /// list.
    package func listingReportingFailure() -> KeyListing {
        do throws(ProtectionError) {
            return try identitiesWithKeys() ?? KeyListing(identities: [])
        } catch {
            return KeyListing(identities: [], unreadable: [WipeLeftover(path: keyDirectories.first ?? "<key store>", owner: nil, error: error)])
        }
    }
}
