import Foundation
import Logging
import Synchronization

/// One recorded log line: its message and its metadata (the provider's merged with the handler's).
struct LoggedLine: Sendable {
    var message: String
    var metadata: Logger.Metadata
}

/// An in-memory log handler that records every line with its merged metadata.
struct RecordingLogHandler: LogHandler {
    final class Store: Sendable {
        private let lines = Mutex<[LoggedLine]>([])
        func append(_ line: LoggedLine) { lines.withLock { $0.append(line) } }
        var all: [LoggedLine] { lines.withLock { $0 } }
    }

    let store: Store
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadataProvider?.get() ?? [:]
        merged.merge(metadata) { _, handler in handler }
        if let explicit = event.metadata { merged.merge(explicit) { _, line in line } }
        store.append(LoggedLine(message: event.message.description, metadata: merged))
    }

    /// A logger that records into a new store.
    static func logger(provider: Logger.MetadataProvider) -> (Logger, Store) {
        let store = Store()
        let logger = Logger(label: "test") { _, _ in
            RecordingLogHandler(store: store, metadataProvider: provider)
        }
        return (logger, store)
    }
}
