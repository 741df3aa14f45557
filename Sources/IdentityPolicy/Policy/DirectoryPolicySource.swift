import Dispatch
import Foundation
import IdentityRuntime

/// The embedded ``PolicySource``: a directory of JSON policy documents (`*.json`, one per managed account or
/// tenant; format in `docs/policy.md`), re-read when it changes.
///
/// - ``reload()`` reads the directory now; ``startPolling()`` re-reads it every ``pollInterval`` seconds.
///   A document is parsed again only when its bytes changed.
/// - A malformed document is an error (``errors``) and the **last good** version of that document stays in
///   force: a typo never opens a policy. A document seen malformed from the start gives its account nothing,
///   and an account with no policy is handled by ``RuntimeSettings/policyRequired``.
/// - A document that is deleted withdraws its policy.
/// - A directory that is missing or unreadable keeps every policy read before (an unmounted volume is not a
///   withdrawal) and reports ``PolicyDocumentError/directoryUnreadable(path:reason:)``.
/// - An account's own document wins over its tenant's document.
///
/// After a reload that changed any policy, the change handler runs (``PolicyManager`` then posts
/// `Notification.Name.policyDidChange`).
public final class DirectoryPolicySource: PolicySource {
    /// The directory read.
    public let directory: String
    /// Seconds between scans while polling.
    public let pollInterval: TimeInterval

    private struct Entry {
        var data: Data
        var document: PolicyDocument?
        var error: PolicyDocumentError?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var directoryError: PolicyDocumentError?
        var accounts: [Identity: (policy: Policy, path: String)] = [:]
        var tenants: [Identity: (policy: Policy, path: String)] = [:]
        var duplicates: [PolicyDocumentError] = []
        var handler: (@Sendable () -> Void)?
        var timer: PollTimer?
    }

    private let state = LockedValue(State())
    /// Serializes reloads (the timer and explicit calls); never taken while `state` is held.
    private let reloading = LockedValue(())
    private let queue = DispatchQueue(label: "identity-policy.directory-source")

    /// A source reading `directory`. Nothing is read until ``reload()`` or ``startPolling()``.
    public init(directory: String, pollInterval: TimeInterval = 5) {
        self.directory = directory
        self.pollInterval = pollInterval
    }

    deinit {
        state.withLock { $0.timer }?.source.cancel()
    }

    /// The polling timer. Safety: a dispatch source is thread-safe; it is only resumed once and cancelled.
    private struct PollTimer: @unchecked Sendable {
        let source: any DispatchSourceTimer
    }

    /// The problems found by the last reload, sorted by path. Empty when every document is good.
    public var errors: [PolicyDocumentError] {
        state.withLock { state in
            let documents = state.entries.values.compactMap(\.error)
            return ((state.directoryError.map { [$0] } ?? []) + documents + state.duplicates).sorted { $0.path < $1.path }
        }
    }

    public func policy(for identity: Identity) -> Policy? {
        guard !identity.isUnmanaged else { return nil }
        let found = state.withLock { state -> Policy? in
            if let match = state.accounts[identity] { return match.policy }
            guard let at = identity.name.lastIndex(of: "@") else { return nil }
            return state.tenants[Identity(identity.name[identity.name.index(after: at)...])]?.policy
        }
        return found.map { policy in
            var policy = policy
            policy.identity = identity
            return policy
        }
    }

    public func setChangeHandler(_ handler: (@Sendable () -> Void)?) {
        state.withLock { $0.handler = handler }
    }

    /// Reads the directory now.
    /// - Returns: whether any policy changed (the change handler has run when it did).
    @discardableResult
    public func reload() -> Bool {
        let (changed, handler) = reloading.withLock { _ in scan() }
        if changed { handler?() }
        return changed
    }

    /// Re-reads the directory every ``pollInterval`` seconds (the first time at once) until ``stopPolling()``.
    public func startPolling() {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let interval = DispatchTimeInterval.nanoseconds(Int(max(pollInterval, 0.001) * 1e9))
        timer.schedule(deadline: .now(), repeating: interval, leeway: .milliseconds(10))
        timer.setEventHandler { [weak self] in self?.reload() }
        let previous = state.withLock { state in
            defer { state.timer = PollTimer(source: timer) }
            return state.timer
        }
        previous?.source.cancel()
        timer.resume()
    }

    /// Stops polling.
    public func stopPolling() {
        state.withLock { state in
            defer { state.timer = nil }
            return state.timer
        }?.source.cancel()
    }

    // MARK: Scanning

    private func scan() -> (Bool, (@Sendable () -> Void)?) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }.sorted()
        } catch {
            let failure = PolicyDocumentError.directoryUnreadable(path: directory, reason: error.localizedDescription)
            state.withLock { $0.directoryError = failure }
            return (false, nil)
        }
        let previous = state.withLock { $0.entries }
        var entries: [String: Entry] = [:]
        for name in names {
            let path = (directory as NSString).appendingPathComponent(name)
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                var entry = previous[name] ?? Entry(data: Data(), document: nil, error: nil)
                entry.error = .unreadable(path: path, reason: error.localizedDescription)
                entries[name] = entry
                continue
            }
            if let old = previous[name], old.data == data {
                entries[name] = old
                continue
            }
            do throws(PolicyDocumentError) {
                entries[name] = Entry(data: data, document: try PolicyDocument(json: data, path: path), error: nil)
            } catch {
                // Keep the last good document of this file in force.
                entries[name] = Entry(data: data, document: previous[name]?.document, error: error)
            }
        }
        var accounts: [Identity: (policy: Policy, path: String)] = [:]
        var tenants: [Identity: (policy: Policy, path: String)] = [:]
        var duplicates: [PolicyDocumentError] = []
        for name in names {
            guard let document = entries[name]?.document else { continue }
            let path = (directory as NSString).appendingPathComponent(name)
            switch document.subject {
            case let .account(identity):
                if let other = accounts[identity] {
                    duplicates.append(.duplicate(path: path, subject: document.subject.description, otherPath: other.path))
                } else {
                    accounts[identity] = (document.policy, path)
                }
            case let .tenant(domain):
                if let other = tenants[domain] {
                    duplicates.append(.duplicate(path: path, subject: document.subject.description, otherPath: other.path))
                } else {
                    tenants[domain] = (document.policy, path)
                }
            }
        }
        return state.withLock { state in
            let changed = !Self.same(state.accounts, accounts) || !Self.same(state.tenants, tenants)
            state.entries = entries
            state.directoryError = nil
            state.accounts = accounts
            state.tenants = tenants
            state.duplicates = duplicates
            return (changed, state.handler)
        }
    }

    private static func same(_ lhs: [Identity: (policy: Policy, path: String)], _ rhs: [Identity: (policy: Policy, path: String)]) -> Bool {
        lhs.count == rhs.count && lhs.allSatisfy { key, value in rhs[key]?.policy == value.policy }
    }
}
