import Synchronization

/// Something a program did with identities that the runtime refused or that cannot be right.
package enum RuntimeIssue: Sendable, Equatable, CustomStringConvertible {
    /// `setCurrentThreadIdentity(_:)` was called in a Swift task outside any synchronous scope.
    case unscopedChangeInTask(Identity?)
    /// A completion handler handed to a delegate (`operation` names the call) was called more than once; every
    /// call after the first was ignored.
    case completionCalledMoreThanOnce(operation: String)

    package var description: String {
        switch self {
        case let .unscopedChangeInTask(identity):
            return "setCurrentThreadIdentity(\(identity.map { String(reflecting: $0.name) } ?? "nil")) was called inside a Swift task outside any synchronous scope and changed nothing; use IdentityContext.withThreadIdentity(_:operation:) in async code"
        case let .completionCalledMoreThanOnce(operation):
            return "the completion handler of \(operation) was called more than once; only the first answer counts, later ones were ignored"
        }
    }
}

/// Where runtime issues go: standard error by default; tests and strict mode install their own sink.
package enum RuntimeIssues {
    package typealias Sink = @Sendable (RuntimeIssue) -> Void

    private static let sink = LockedValue<Sink?>(nil)

    /// Installs `newSink` (nil: standard error) and returns the previous one.
    @discardableResult
    package static func setSink(_ newSink: Sink?) -> Sink? {
        sink.withLock { current in
            let previous = current
            current = newSink
            return previous
        }
    }

    package static func report(_ issue: RuntimeIssue) {
        if let installed = sink.withLock({ $0 }) {
            installed(issue)
        } else {
            StandardError.write("identity runtime issue: \(issue)\n")
        }
    }
}
