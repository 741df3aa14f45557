/// Where a unit of work was submitted: `#fileID` and `#line` of the submitting call.
public struct SubmitSite: Sendable, Equatable, CustomStringConvertible {
    /// The submitting call's `#fileID`.
    public let fileID: StaticString
    /// The submitting call's `#line`.
    public let line: UInt

    /// The site of the call that evaluates the defaults, or the one given.
    public init(fileID: StaticString = #fileID, line: UInt = #line) {
        self.fileID = fileID
        self.line = line
    }

    /// A site for submissions through APIs that cannot take a call site (overridden Foundation methods).
    public static let unknown = SubmitSite(fileID: "<unknown>", line: 0)

    public var description: String { "\(fileID):\(line)" }

    public static func == (lhs: SubmitSite, rhs: SubmitSite) -> Bool {
        lhs.line == rhs.line && lhs.fileID.description == rhs.fileID.description
    }
}

/// Something a program did with identities that the runtime refused or that cannot be right.
///
/// The runtime always reports ``unscopedChangeInTask(_:)``; the other issues are found by strict mode
/// (``IdentityStrictMode``).
public enum RuntimeIssue: Sendable, Equatable, CustomStringConvertible {
    /// `setCurrentThreadIdentity(_:)` was called in a Swift task outside any synchronous scope.
    case unscopedChangeInTask(Identity?)
    /// A unit observed another thread identity at entry than the one captured for it at submission.
    case misattributed(site: SubmitSite, expected: Identity?, observed: Identity?)
    /// When a unit ended, the worker thread's identity was not what it was before the unit.
    case identityLeaked(site: SubmitSite, before: Identity?, after: Identity?)
    /// A unit was released without ever running (a work item never performed, a block never called).
    case unitNeverRan(site: SubmitSite)
    /// A unit that must run once ran again.
    case unitRanTwice(site: SubmitSite)
    /// A completion handler (a delegate's answer, for example) was called again after it had answered; the
    /// later call was ignored. `operation` names what was being answered.
    case completionCalledMoreThanOnce(operation: String)
    /// A thread ended (or the process exited) with an identity set by the unscoped setter outside any scope.
    case unscopedIdentityNotReset(thread: String, identity: Identity)
    /// An element of an ``IdentityChannel`` that must be handled under its sender's identity was read under
    /// another one (`site`: where it was sent).
    case channelElementMisattributed(site: SubmitSite, expected: Identity?, observed: Identity?)
    /// A synchronous call inside a Swift task blocked its thread waiting for a store (a key store or a policy
    /// source that reaches a database): it holds one of the few cooperative threads until the store answers.
    /// Use the asynchronous entry point (`manager.async`) there. `operation` names what was waited for.
    case blockingWaitInTask(operation: String)

    /// Where the unit concerned was submitted, for the issues that concern one unit.
    public var site: SubmitSite? {
        switch self {
        case let .misattributed(site, _, _), let .identityLeaked(site, _, _), let .unitNeverRan(site),
             let .unitRanTwice(site), let .channelElementMisattributed(site, _, _):
            return site
        case .unscopedChangeInTask, .unscopedIdentityNotReset, .completionCalledMoreThanOnce, .blockingWaitInTask:
            return nil
        }
    }

    /// A stable name for the kind of issue, for counting and filtering.
    public var kind: String {
        switch self {
        case .unscopedChangeInTask: return "unscopedChangeInTask"
        case .misattributed: return "misattributed"
        case .identityLeaked: return "identityLeaked"
        case .unitNeverRan: return "unitNeverRan"
        case .unitRanTwice: return "unitRanTwice"
        case .completionCalledMoreThanOnce: return "completionCalledMoreThanOnce"
        case .unscopedIdentityNotReset: return "unscopedIdentityNotReset"
        case .channelElementMisattributed: return "channelElementMisattributed"
        case .blockingWaitInTask: return "blockingWaitInTask"
        }
    }

    public var description: String {
        func show(_ identity: Identity?) -> String { identity.map { String(reflecting: $0.name) } ?? "nil" }
        switch self {
        case let .unscopedChangeInTask(identity):
            return "setCurrentThreadIdentity(\(show(identity))) was called inside a Swift task outside any synchronous scope and changed nothing; use IdentityContext.withThreadIdentity(_:operation:) in async code"
        case let .misattributed(site, expected, observed):
            return "unit submitted at \(site) observed identity \(show(observed)) instead of \(show(expected))"
        case let .identityLeaked(site, before, after):
            return "unit submitted at \(site) left its worker thread with identity \(show(after)) (was \(show(before)))"
        case let .unitNeverRan(site):
            return "unit submitted at \(site) was released without running"
        case let .unitRanTwice(site):
            return "unit submitted at \(site) ran more than once"
        case let .completionCalledMoreThanOnce(operation):
            return "completion handler for \(operation) was called more than once; the later calls were ignored"
        case let .channelElementMisattributed(site, expected, observed):
            return "channel element sent at \(site) as \(show(expected)) was handled under \(show(observed)); handle it with message.run { ... } or channel.forEach"
        case let .blockingWaitInTask(operation):
            return "a synchronous call inside a Swift task blocked its thread waiting for a store (\(operation)); call the asynchronous entry point (manager.async) in async code"
        case let .unscopedIdentityNotReset(thread, identity):
            return "thread \(thread) still had identity \(show(identity)) from setCurrentThreadIdentity outside any scope; set it back to nil when done"
        }
    }
}

/// Where runtime issues go: every observer a test has added sees each one; then, unless a capture has taken it
/// as expected, the handler set with ``IdentityStrictMode/setReportHandler(_:)`` (default: standard error).
package enum RuntimeIssues {
    package typealias Sink = @Sendable (RuntimeIssue) -> Void
    /// Sees an issue and answers whether it was expected (captured): then it is not printed or handed to the
    /// report handler.
    package typealias Capture = @Sendable (RuntimeIssue) -> Bool

    private struct Sinks {
        var handler: Sink?
        var observers: [Int: Capture] = [:]
        var nextToken = 0
    }

    private static let sinks = LockedValue(Sinks())

    /// Replaces the handler (nil: standard error).
    package static func setHandler(_ handler: Sink?) {
        sinks.withLock { $0.handler = handler }
    }

    /// Adds an observer that sees every report until removed; returns its token.
    package static func addObserver(_ observer: @escaping Sink) -> Int {
        addCapture { issue in
            observer(issue)
            return false
        }
    }

    /// Adds a capture that sees every report until removed, and keeps those it answers `true` for from the
    /// handler and standard error; returns its token for ``removeObserver(_:)``.
    package static func addCapture(_ capture: @escaping Capture) -> Int {
        sinks.withLock { sinks in
            sinks.nextToken += 1
            sinks.observers[sinks.nextToken] = capture
            return sinks.nextToken
        }
    }

    package static func removeObserver(_ token: Int) {
        sinks.withLock { _ = $0.observers.removeValue(forKey: token) }
    }

    package static func report(_ issue: RuntimeIssue) {
        let (handler, observers) = sinks.withLock { ($0.handler, Array($0.observers.values)) }
        var captured = false
        for observer in observers where observer(issue) { captured = true }
        // An issue a test caused on purpose and captured is neither printed nor fatal.
        guard !captured else { return }
        if let handler {
            handler(issue)
        } else {
            StandardError.write("identity runtime issue: \(issue)\n")
        }
        if IdentityStrictMode.isFatal {
            fatalError("identity strict mode: \(issue)")
        }
    }
}
