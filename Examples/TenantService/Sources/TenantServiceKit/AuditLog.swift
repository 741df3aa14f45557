import Foundation
import Logging
import Synchronization

/// Where the audit service's log lines go: kept in memory (the last ``capacity`` lines, and counts), so that
/// the load driver and the tests can check that every line names the identity it was logged for. Lines are
/// also printed when `echo` is set.
public final class AuditLog: Sendable {
    public struct Line: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: [String: String]
    }

    struct State {
        var lines: [Line] = []
        var total = 0
        /// Lines whose `identity` metadata (from the identity metadata provider) differs from the `account`
        /// the handler put in the line itself.
        var mismatched = 0
    }

    public let capacity: Int
    public let echo: Bool
    private let state = Mutex(State())

    public init(capacity: Int = 1_000, echo: Bool = false) {
        self.capacity = capacity
        self.echo = echo
    }

    func record(_ line: Line) {
        if echo {
            let metadata = line.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            print("[audit] \(line.level) \(metadata) \(line.message)")
        }
        state.withLock { state in
            state.total += 1
            if line.metadata["identity"] != line.metadata["account"] { state.mismatched += 1 }
            state.lines.append(line)
            if state.lines.count > capacity { state.lines.removeFirst(state.lines.count - capacity) }
        }
    }

    /// The lines kept, oldest first.
    public var lines: [Line] { state.withLock { $0.lines } }
    /// Every line logged.
    public var total: Int { state.withLock { $0.total } }
    /// Lines whose `identity` metadata was not the account the handler served.
    public var mismatched: Int { state.withLock { $0.mismatched } }
}

/// A `LogHandler` writing to an ``AuditLog``, with the metadata of the logger, of the line and of its
/// metadata provider (the identity provider of IdentityLogging) merged.
public struct AuditLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let log: AuditLog

    public init(log: AuditLog, metadataProvider: Logger.MetadataProvider?) {
        self.log = log
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        log.record(AuditLog.Line(
            level: event.level, message: event.message.description, metadata: merged.mapValues { $0.description }))
    }
}
