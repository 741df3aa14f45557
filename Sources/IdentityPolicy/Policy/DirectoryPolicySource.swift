import Dispatch
import Foundation
import IdentityRuntime

/// The embedded ``PolicySource``: a directory of JSON policy documents (`*.json`, one per managed account or
/// tenant; format in <doc:AccountsAndPolicies>), re-read when it changes.
///
/// - The initializer reads the directory: when it returns, the source holds its policies (and it throws when
///   it cannot read the directory), so no decision is ever made before the documents were read.
/// - ``reload()`` reads the directory now. The source starts no work of its own: its manager's
///   ``PolicyManager/run()`` reads it again every ``RuntimeSettings/policyPollInterval`` seconds.
///   A document is parsed again only when its bytes changed.
/// - A malformed or unreadable document is an error (``errors``, with its position and key) and the **last
///   good** version of that document stays in force: a typo never opens a policy. A document malformed from
///   the start leaves the account or tenant it names *undecided* (``PolicySet/unavailableAccounts``,
///   ``PolicySet/unavailableTenants``): its manager refuses their data with `ProtectionError.policyUnavailable`
///   until the document is fixed or removed. When not even its `account` or `tenant` can be read, every
///   account without a good document of its own is undecided (``PolicySet/isComplete``).
/// - A document that is deleted withdraws its policy.
/// - A directory that is missing or unreadable keeps every policy read before (an unmounted volume is not a
///   withdrawal) and reports ``PolicyDocumentError/directoryUnreadable(path:reason:)``.
/// - An account's own document wins over its tenant's document; a tenant document naming the tenant's ID wins
///   over one naming its domain (for accounts registered with that ID).
///
/// After a reload that changed any policy, the change handler runs (``PolicyManager`` then posts
/// `Notification.Name.policyDidChange`).
public final class DirectoryPolicySource: PolicySource {
    /// The directory read.
    public let directory: String

    private struct Entry {
        /// The bytes last read (`nil`: the file could not be read).
        var data: Data?
        /// The document in force: the current text's, or the last good version's.
        var document: PolicyDocument?
        /// Why the current text cannot be used.
        var error: PolicyDocumentError?
        /// The subjects the current text names as far as they can be read, when it cannot be used.
        var subjects: Set<PolicyDocument.Subject> = []
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var directoryError: PolicyDocumentError?
        var policies = PolicySet()
        var duplicates: [PolicyDocumentError] = []
        var handler: (@Sendable () -> Void)?
        /// Whether a scan has read the directory.
        var loaded = false

        var errors: [PolicyDocumentError] {
            let documents = entries.values.compactMap(\.error)
            return ((directoryError.map { [$0] } ?? []) + documents + duplicates).sorted { $0.path < $1.path }
        }
    }

    private let state = LockedValue(State())
    /// Serializes reloads (its manager's and explicit calls); never taken while `state` is held.
    private let reloading = LockedValue(())
    /// Where ``reload(deadline:)`` reads.
    private let readQueue = DispatchQueue(label: "identity-policy.directory-source")

    /// A source reading `directory`, read once before the initializer returns; ``reload()`` (and its manager's
    /// ``PolicyManager/run()``) read it again.
    /// - Throws: ``PolicyDocumentError/directoryUnreadable(path:reason:)`` when the directory is missing or
    ///   cannot be read. Malformed documents do not throw: they are in ``errors``, and leave the accounts they
    ///   may govern undecided (refused) until they are fixed or removed.
    public init(directory: String) throws(PolicyDocumentError) {
        self.directory = directory
        _ = scan()
        if let failure = state.withLock({ $0.loaded ? nil : $0.directoryError }) { throw failure }
    }

    /// A source for ``RuntimeSettings/policyDirectory``: reads the directory once like the public initializer,
    /// but a directory it cannot read yet leaves it unloaded (``hasLoaded`` is `false`, and its manager refuses
    /// operations on owned data) until a later reload reads it.
    init(unloadedUntilReadable directory: String) {
        self.directory = directory
        _ = scan()
    }

    /// Whether the directory has been read (always, for a source made with the public initializer).
    public var hasLoaded: Bool {
        state.withLock { $0.loaded }
    }

    /// The problems found by the last reload, sorted by path: each document that cannot be used (with the
    /// position of the offending key or value, and the key), duplicates, an unreadable directory. Empty when
    /// every document is good.
    public var errors: [PolicyDocumentError] {
        state.withLock(\.errors)
    }

    public var policies: PolicySet {
        state.withLock { $0.policies }
    }

    public func setChangeHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLock { $0.handler = handler }
    }

    /// Reads the directory now.
    /// - Returns: whether any policy changed (the change handler has run when it did).
    /// The change handler also runs when only ``errors`` changed (so that a manager lists and posts them).
    @discardableResult
    public func reload() -> Bool {
        let scanned = reloading.withLock { _ in scan() }
        if scanned.changed || scanned.errorsChanged { scanned.handler?() }
        return scanned.changed
    }

    /// ``reload()``, for ``PolicyManager/reloadPolicies(timeout:)`` and its manager's ``PolicyManager/run()``:
    /// the directory is read on a dispatch queue of its own, so that the blocking file reads never hold a
    /// thread of Swift concurrency's cooperative pool (the deadline is not needed: the directory is local).
    @discardableResult
    public func reload(deadline: ContinuousClock.Instant) async throws(PolicyDocumentError) -> Bool {
        await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            readQueue.async { done.resume(returning: self.reload()) }
        }
    }

    // MARK: Scanning

    private func scan() -> (changed: Bool, errorsChanged: Bool, handler: (@Sendable () -> Void)?) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }.sorted()
        } catch {
            let failure = PolicyDocumentError.directoryUnreadable(path: directory, reason: error.localizedDescription)
            return state.withLock { state in
                let errorsChanged = state.directoryError != failure
                state.directoryError = failure
                return (false, errorsChanged, state.handler)
            }
        }
        let previous = state.withLock { $0.entries }
        var entries: [String: Entry] = [:]
        for name in names {
            let path = (directory as NSString).appendingPathComponent(name)
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                // Deleted between the listing and the read (no entry at all, not even a dangling link): a
                // withdrawal, as if it had not been listed.
                var info = stat()
                if lstat(path, &info) != 0 && errno == ENOENT { continue }
                // A document that cannot be read is one that does not parse, whose subject is unknown: its last
                // good version stays in force; without one, the set is incomplete.
                entries[name] = Entry(
                    data: nil, document: previous[name]?.document,
                    error: .unreadable(path: path, reason: error.localizedDescription))
                continue
            }
            if let old = previous[name], old.data == data {
                entries[name] = old
                continue
            }
            switch PolicyDocument.read(json: data, path: path) {
            case let .document(document):
                entries[name] = Entry(data: data, document: document, error: nil)
            case let .broken(error, subjects):
                // Keep the last good document of this file in force.
                entries[name] = Entry(data: data, document: previous[name]?.document, error: error, subjects: subjects)
            }
        }
        let directory = directory
        func path(_ name: String) -> String { (directory as NSString).appendingPathComponent(name) }
        let (policies, duplicates) = PolicySet.assembled(
            from: names.compactMap { name in entries[name]?.document.map { (path: path(name), document: $0) } },
            broken: names.compactMap { name in
                entries[name].flatMap { $0.error == nil ? nil : (path: path(name), subjects: $0.subjects) }
            })
        return state.withLock { state in
            // The first successful read is a change even when it found no policy: the manager learns it loaded.
            let changed = state.policies != policies || !state.loaded
            let errorsBefore = state.errors
            state.loaded = true
            state.entries = entries
            state.directoryError = nil
            state.policies = policies
            state.duplicates = duplicates
            return (changed, state.errors != errorsBefore, state.handler)
        }
    }
}
