import Dispatch
import Foundation
import IdentityPolicy
import IdentityRuntime
import PostgresNIO
import NIOConcurrencyHelpers

/// A `PolicySource` shared by a fleet: policy documents in the table `identity_policies`, one row per account or
/// tenant document, every instance seeing a change within a second.
///
/// - Each row is `(name, document)`: `name` is a label of the operator's choosing (like the directory source's
///   file names) and `document` the JSON policy document, parsed by the same `PolicyDocument` parser as
///   `DirectoryPolicySource` (format in Sources/IdentityPolicy/IdentityPolicy.docc/AccountsAndPolicies.md). The document names its account or tenant.
/// - A trigger `NOTIFY`s `identity_policies` on every insert, update, delete and truncate; every instance then
///   re-reads the table (rows whose text did not change are not parsed again) and, when a policy changed, calls
///   the change handler, so `PolicyManager` posts its per-account change events. The table is also re-read every
///   ``PostgresFleetConfiguration/policyPollInterval`` seconds and whenever the notification connection comes
///   back, in case a notification was missed.
/// - A malformed row is reported in ``errors`` (with the position of the offending key or value, and the key)
///   and the **last good** version of that row stays in force, as with the directory source. A row malformed
///   from the start leaves the account or tenant it names undecided (`PolicySet.unavailableAccounts`,
///   `unavailableTenants`): a `PolicyManager` refuses their data with `ProtectionError.policyUnavailable` until
///   the row is fixed or deleted; when not even its `account` or `tenant` can be read, every account without a
///   good row of its own is undecided. Two rows naming the same subject: the first by name wins, the other is
///   reported as a duplicate.
/// - The database unreachable: every policy read before stays in force (an outage is not a withdrawal), the
///   failure is in ``lastError`` and in ``errors`` as `PolicyDocumentError.directoryUnreadable`, and the reads
///   go on until the database answers. Policy lookups never touch the database, so they never block.
///
/// ```swift
/// let source = PostgresPolicySource(fleet: fleet)
/// try await source.reload()                 // optional: fail fast when the table cannot be read now
/// let manager = PolicyManager(policySource: source, keyStore: PostgresKeyStore(fleet: fleet, keyEncryptionKeys: keks))
/// ```
public final class PostgresPolicySource: PolicySource {
    /// The database connections.
    public let fleet: PostgresFleet

    /// The name errors give the table.
    public static let tablePath = "postgres:identity_policies"

    private struct Entry {
        var text: String
        /// The document in force: the row's current one, or its last good version.
        var document: PolicyDocument?
        /// Why the row's current text cannot be used.
        var error: PolicyDocumentError?
        /// The subjects the current text names as far as they can be read, when it cannot be used.
        var subjects: Set<PolicyDocument.Subject> = []
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var policies = PolicySet()
        var duplicates: [PolicyDocumentError] = []
        var lastError: PostgresFleetError?
        var lastReload: Date?
        var reloads = 0
        var handler: (@Sendable () -> Void)?
        var reloadScheduled = false
        var listenEpoch = -1
        /// Reads are numbered as they start; a read applies only when no later read applied before it.
        var readsStarted: UInt64 = 0
        var readApplied: UInt64 = 0
        /// ``errors`` when the change handler last ran for them.
        var reportedErrors: [PolicyDocumentError] = []

        var errors: [PolicyDocumentError] {
            var errors = entries.values.compactMap(\.error) + duplicates
            if let failure = lastError {
                errors.append(.directoryUnreadable(path: PostgresPolicySource.tablePath, reason: failure.description))
            }
            return errors.sorted { $0.path < $1.path }
        }
    }

    private let state = NIOLockedValueBox(State())
    private let queue = DispatchQueue(label: "identity-postgres.policies")
    private let timer: DispatchSourceTimerBox
    private let observer: NIOLockedValueBox<Int?> = NIOLockedValueBox(nil)

    /// A source reading `fleet`'s `identity_policies` table. The first read is scheduled at once, in the
    /// background; call ``reload()`` to read now.
    public init(fleet: PostgresFleet) {
        self.fleet = fleet
        self.timer = DispatchSourceTimerBox(DispatchSource.makeTimerSource(queue: queue))
        let interval = DispatchTimeInterval.milliseconds(Int(max(fleet.configuration.policyPollInterval, 0.05) * 1000))
        timer.source.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(50))
        timer.source.setEventHandler { [weak self] in self?.scheduleReload() }
        timer.source.resume()
        let (token, _) = fleet.addObserver { [weak self] event in self?.handle(event) }
        observer.withLockedValue { $0 = token }
        scheduleReload()
    }

    deinit {
        timer.source.cancel()
        if let token = observer.withLockedValue({ $0 }) { fleet.removeObserver(token) }
    }

    public var policies: PolicySet {
        state.withLockedValue { $0.policies }
    }

    public func setChangeHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLockedValue { $0.handler = handler }
    }

    /// The problems found by the last reload, sorted by row: malformed documents (whose last good version stays
    /// in force), duplicates, and the table being unreadable.
    public var errors: [PolicyDocumentError] {
        state.withLockedValue(\.errors)
    }

    /// The last failure to read the table; `nil` once a read succeeded after it.
    public var lastError: PostgresFleetError? {
        state.withLockedValue { $0.lastError }
    }

    /// Whether the table has been read successfully at least once. Until then a ``PolicyManager`` over this
    /// source refuses operations on owned data (`ProtectionError.policyUnavailable`): the first read runs in
    /// the background, and no decision is made before it.
    public var hasLoaded: Bool {
        state.withLockedValue { $0.lastReload != nil }
    }

    /// When the table was last read successfully.
    public var lastReload: Date? {
        state.withLockedValue { $0.lastReload }
    }

    /// Reads the table now, suspending (never blocking a thread) until it is read or
    /// ``PostgresFleetConfiguration/callTimeout`` passed.
    /// - Returns: whether any policy changed (the change handler has run when it did).
    /// - Throws: ``PostgresFleetError`` when the table could not be read; the policies in force stay.
    @discardableResult
    public func reload() async throws(PostgresFleetError) -> Bool {
        try await read(deadline: fleet.callDeadline())
    }

    /// ``reload()`` for `PolicyManager.reloadPolicies(timeout:)`, by `deadline` (or the call timeout, when
    /// earlier); a failure is `PolicyDocumentError.directoryUnreadable` with the table's name.
    @discardableResult
    public func reload(deadline: ContinuousClock.Instant) async throws(PolicyDocumentError) -> Bool {
        do throws(PostgresFleetError) {
            return try await read(deadline: fleet.callDeadline(deadline))
        } catch {
            throw .directoryUnreadable(path: Self.tablePath, reason: error.description)
        }
    }

    /// The change handler also runs when only ``errors`` changed (so that a manager lists and posts them).
    private func read(deadline: ContinuousClock.Instant) async throws(PostgresFleetError) -> Bool {
        let scanned: (changed: Bool, errorsChanged: Bool, handler: (@Sendable () -> Void)?)
        do throws(PostgresFleetError) {
            scanned = try await scan(deadline: deadline)
        } catch {
            // The table could not be read: a manager learns it from ``errors`` (the policies in force stay).
            if state.withLockedValue({ $0.reportedErrors != $0.errors }) { notifyErrors() }
            throw error
        }
        if scanned.changed || scanned.errorsChanged { scanned.handler?() }
        return scanned.changed
    }

    /// Calls the change handler for a change of ``errors`` alone.
    private func notifyErrors() {
        let handler = state.withLockedValue { state in
            state.reportedErrors = state.errors
            return state.handler
        }
        handler?()
    }

    // MARK: Writing

    /// Stores `text` as the document of row `name` (inserted or replaced), for operators' tools and tests. The
    /// text is stored as given: every instance validates it when it reads it, and a malformed document is
    /// reported there while the row's last good version stays in force. Every instance hears of the change.
    public func storeDocument(_ text: String, named name: String) async throws(PostgresFleetError) {
        _ = try await fleet.query(
            """
            INSERT INTO identity_policies (name, document) VALUES (\(name), \(text))
            ON CONFLICT (name) DO UPDATE SET document = EXCLUDED.document, updated_at = now()
            """,
            operation: "storing policy document \(name)", deadline: fleet.callDeadline())
    }

    /// Deletes row `name`; its policy is withdrawn on every instance.
    public func deleteDocument(named name: String) async throws(PostgresFleetError) {
        _ = try await fleet.query(
            "DELETE FROM identity_policies WHERE name = \(name)", operation: "deleting policy document \(name)",
            deadline: fleet.callDeadline())
    }

    // MARK: Reading

    /// A read in the background; its failure is kept in ``lastError`` and ``errors``.
    private func reloadReportingErrors() async {
        // Dropping the error is safe: `read` has recorded it (``lastError``, ``errors``) and told the manager,
        // and the policies in force stay (an outage is not a withdrawal; a source never read refuses).
        _ = try? await reload()
    }

    private func scheduleReload() {
        let schedule = state.withLockedValue { state -> Bool in
            defer { state.reloadScheduled = true }
            return !state.reloadScheduled
        }
        guard schedule else { return }
        Task { [weak self] in
            guard let self else { return }
            // Cleared before reading: a notification arriving during the read schedules another one.
            self.state.withLockedValue { $0.reloadScheduled = false }
            await self.reloadReportingErrors()
        }
    }

    private func handle(_ event: PostgresFleet.Event) {
        switch event {
        case let .notification(channel, _):
            if channel == "identity_policies" { scheduleReload() }
        case let .listening(epoch):
            let fresh = state.withLockedValue { state -> Bool in
                defer { state.listenEpoch = max(state.listenEpoch, epoch) }
                return epoch > state.listenEpoch
            }
            if fresh { scheduleReload() }
        case .notListening:
            break
        }
    }

    private func scan(
        deadline: ContinuousClock.Instant
    ) async throws(PostgresFleetError) -> (changed: Bool, errorsChanged: Bool, handler: (@Sendable () -> Void)?) {
        let ticket = state.withLockedValue { state in
            state.readsStarted += 1
            return state.readsStarted
        }
        let rows: [PostgresRow]
        do throws(PostgresFleetError) {
            rows = try await fleet.query(
                "SELECT name, document FROM identity_policies ORDER BY name", operation: "reading identity_policies",
                deadline: deadline)
        } catch {
            state.withLockedValue { $0.lastError = error }
            throw error
        }
        var texts: [(String, String)] = []
        do {
            for row in rows {
                let (name, document) = try row.decode((String, String).self, context: .default)
                texts.append((name, document))
            }
        } catch {
            let failure = PostgresFleetError.corruptRow(table: "identity_policies", reason: "\(error)")
            state.withLockedValue { $0.lastError = failure }
            throw failure
        }
        let previous = state.withLockedValue { $0.entries }
        var entries: [String: Entry] = [:]
        for (name, text) in texts {
            if let old = previous[name], old.text == text {
                entries[name] = old
                continue
            }
            switch PolicyDocument.read(json: Data(text.utf8), path: "\(Self.tablePath)/\(name)") {
            case let .document(document):
                entries[name] = Entry(text: text, document: document, error: nil)
            case let .broken(error, subjects):
                // Keep the last good version of this row in force; without one, its subject is undecided.
                entries[name] = Entry(text: text, document: previous[name]?.document, error: error, subjects: subjects)
            }
        }
        // The same assembly as every source: a broken row's account or tenant is undecided (refused), and a
        // broken row whose subject cannot be read leaves every account without a good row of its own undecided.
        let (policies, duplicates) = PolicySet.assembled(
            from: texts.compactMap { name, _ in entries[name]?.document.map { (path: "\(Self.tablePath)/\(name)", document: $0) } },
            broken: texts.compactMap { name, _ in
                entries[name].flatMap { $0.error == nil ? nil : (path: "\(Self.tablePath)/\(name)", subjects: $0.subjects) }
            })
        return state.withLockedValue { state in
            // A read that started later has applied already: this one read older rows.
            guard ticket > state.readApplied else { return (false, false, nil) }
            state.readApplied = ticket
            // The first successful read is a change even when it found no policy: the manager learns it loaded.
            let changed = state.policies != policies || state.lastReload == nil
            state.entries = entries
            state.policies = policies
            state.duplicates = duplicates
            state.lastError = nil
            state.lastReload = Date()
            state.reloads += 1
            let errors = state.errors
            let errorsChanged = errors != state.reportedErrors
            state.reportedErrors = errors
            return (changed, errorsChanged, state.handler)
        }
    }
}
