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
/// - A malformed row is reported in ``errors`` and the **last good** version of that row stays in force, as with
///   the directory source; a row malformed from the start gives its subject nothing. Two rows naming the same
///   subject: the first by name wins, the other is reported as a duplicate.
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
        var document: PolicyDocument?
        var error: PolicyDocumentError?
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
        state.withLockedValue { state in
            var errors = state.entries.values.compactMap(\.error) + state.duplicates
            if let failure = state.lastError {
                errors.append(.directoryUnreadable(path: Self.tablePath, reason: failure.description))
            }
            return errors.sorted { $0.path < $1.path }
        }
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

    private func read(deadline: ContinuousClock.Instant) async throws(PostgresFleetError) -> Bool {
        let (changed, handler) = try await scan(deadline: deadline)
        if changed { handler?() }
        return changed
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
        // The failure is kept in lastError and errors (reload records it), and the source's last good set and
        // its hasLoaded stay as they were: nothing is decided from a failed read.
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

    private func scan(deadline: ContinuousClock.Instant) async throws(PostgresFleetError) -> (Bool, (@Sendable () -> Void)?) {
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
            let path = "\(Self.tablePath)/\(name)"
            do throws(PolicyDocumentError) {
                entries[name] = Entry(text: text, document: try PolicyDocument(json: Data(text.utf8), path: path), error: nil)
            } catch {
                // Keep the last good version of this row in force.
                entries[name] = Entry(text: text, document: previous[name]?.document, error: error)
            }
        }
        let (policies, duplicates) = PolicySet.assembled(from: texts.compactMap { name, _ in
            entries[name]?.document.map { (path: "\(Self.tablePath)/\(name)", document: $0) }
        })
        return state.withLockedValue { state in
            // A read that started later has applied already: this one read older rows.
            guard ticket > state.readApplied else { return (false, nil) }
            state.readApplied = ticket
            // The first successful read is a change even when it found no policy: the manager learns it loaded.
            let changed = state.policies != policies || state.lastReload == nil
            state.entries = entries
            state.policies = policies
            state.duplicates = duplicates
            state.lastError = nil
            state.lastReload = Date()
            state.reloads += 1
            return (changed, state.handler)
        }
    }
}
