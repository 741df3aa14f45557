import Dispatch
import Foundation
import IdentityRuntime
import Synchronization

/// One row of the propagation table (Sources/IdentityRuntime/IdentityRuntime.docc/IdentitiesAndPropagation.md) as a live check: it submits work through one mechanism
/// under a given submitter identity and records what the work observes as its thread identity.
///
/// Used by `identity-harness verify` and by the test suite, so both check the same table.
public struct PropagationCheck: Sendable, CustomStringConvertible {
    /// The mechanism, e.g. `IdentityDispatchQueue.async`.
    public let mechanism: String
    /// When the identity is captured, as the table says ("at submission", "nothing", ...).
    public let captured: String
    /// What the unit must observe, given the submitter's identity.
    public let expected: @Sendable (_ submitter: Identity?) -> Identity?
    /// Whether the row needs the main queue (the main actor) to be serviced. Where it is not (a process
    /// that never runs its main loop), the row is skipped instead of waiting forever.
    public let requiresMainQueue: Bool
    /// Submits the work under `submitter` and returns every identity the work observed.
    public let observe: @Sendable (_ submitter: Identity?) async -> [Identity?]

    public var description: String { mechanism }

    /// A row: `observe` submits work through the mechanism under the submitter's identity and returns what
    /// the work observed; `expected` says what it must observe. Integration packages build their own tables
    /// of rows with it.
    public init(
        mechanism: String, captured: String,
        expected: @escaping @Sendable (_ submitter: Identity?) -> Identity?,
        requiresMainQueue: Bool = false,
        observe: @escaping @Sendable (_ submitter: Identity?) async -> [Identity?]
    ) {
        self.mechanism = mechanism
        self.captured = captured
        self.expected = expected
        self.requiresMainQueue = requiresMainQueue
        self.observe = observe
    }

    /// What a unit calls with the identity it observes.
    public typealias Report = @Sendable (Identity?) -> Void

    /// A row whose unit must observe the submitter's identity: `submit` runs inside the submitter's scope and
    /// hands `report` to the unit, which calls it `count` times with what it observes.
    public static func inheriting(
        _ mechanism: String, at captured: String, count: Int = 1, _ submit: @escaping @Sendable (@escaping Report) -> Void
    ) -> PropagationCheck {
        PropagationCheck(mechanism: mechanism, captured: captured, expected: { $0 }) { submitter in
            await collectReports(count) { report in
                IdentityContext.withThreadIdentity(submitter) { submit(report) }
            }
        }
    }

    /// A row whose unit must observe no identity, whatever the submitter's (`submit` runs in its scope).
    public static func notCarried(
        _ mechanism: String, _ submit: @escaping @Sendable (@escaping Report) -> Void
    ) -> PropagationCheck {
        PropagationCheck(mechanism: mechanism, captured: "nothing", expected: { _ in nil }) { submitter in
            await collectReports(1) { report in
                IdentityContext.withThreadIdentity(submitter) { submit(report) }
            }
        }
    }

    /// Runs the check for one submitter identity.
    public func run(submitter: Identity?) async -> PropagationOutcome {
        if requiresMainQueue, await !MainQueueProbe.isServiced() {
            return PropagationOutcome(
                check: self, submitter: submitter, expected: expected(submitter), observed: [],
                skipped: "the main queue is not serviced in this process")
        }
        let observed = await observe(submitter)
        return PropagationOutcome(check: self, submitter: submitter, expected: expected(submitter), observed: observed)
    }
}

/// What one ``PropagationCheck`` saw for one submitter identity.
public struct PropagationOutcome: Sendable {
    /// The row that ran.
    public let check: PropagationCheck
    /// The identity the work was submitted under.
    public let submitter: Identity?
    /// The identity the rule says the work must observe.
    public let expected: Identity?
    /// What each run of the work observed.
    public let observed: [Identity?]
    /// Why the row did not run, when it could not (``PropagationCheck/requiresMainQueue``).
    public var skipped: String? = nil

    /// Every observation matched, and there was at least one (false when skipped).
    public var passed: Bool {
        skipped == nil && !observed.isEmpty && observed.allSatisfy { $0 == expected }
    }

    /// The first observation that did not match, or the first one.
    public var shownObservation: Identity? {
        observed.first(where: { $0 != expected }) ?? observed.first ?? nil
    }
}

extension Optional where Wrapped == Identity {
    /// `nil`, `""` or the quoted name, for tables.
    public var tableDescription: String {
        switch self {
        case .none: return "nil"
        case let .some(identity): return "\"\(identity.name)\""
        }
    }
}

/// The propagation table (Sources/IdentityRuntime/IdentityRuntime.docc/IdentitiesAndPropagation.md), row by row, as live checks.
public enum PropagationTable {
    /// Submitter identities every row is run with: unset, unmanaged and a named account.
    public static let submitters: [Identity?] = [nil, .unmanaged, "alice@contoso.com"]

    /// A second account, used where a row must show that one identity wins over another.
    public static let other: Identity = "bob@fabrikam.com"

    /// Every row of the table.
    public static let checks: [PropagationCheck] = dispatchChecks + operationChecks + concurrencyChecks
        + actorChecks + streamChecks + channelChecks + foundationChecks + unwrappedChecks + flowChecks

    static let serial = IdentityDispatchQueue(label: "propagation.serial")
    static let concurrent = IdentityDispatchQueue(label: "propagation.concurrent", attributes: .concurrent)

    // MARK: Dispatch

    static let dispatchChecks: [PropagationCheck] = [
        .inheriting("IdentityDispatchQueue.async (serial)", at: "submission") { report in
            serial.async { report(current) }
        },
        .inheriting("IdentityDispatchQueue.async (concurrent)", at: "submission") { report in
            concurrent.async { report(current) }
        },
        .inheriting("IdentityDispatchQueue.async(flags: .barrier)", at: "submission") { report in
            concurrent.async(flags: .barrier) { report(current) }
        },
        .inheriting("IdentityDispatchQueue.async(group:)", at: "submission") { report in
            let group = DispatchGroup()
            concurrent.async(group: group) { report(current) }
        },
        .inheriting("IdentityDispatchQueue.asyncAfter", at: "submission") { report in
            serial.asyncAfter(deadline: .now() + .milliseconds(1)) { report(current) }
        },
        .inheriting("IdentityDispatchQueue.sync", at: "the call") { report in
            report(concurrent.sync { current })
        },
        .inheriting("IdentityDispatchQueue.asyncAndWait", at: "the call") { report in
            report(serial.asyncAndWait { current })
        },
        PropagationCheck(
            mechanism: "IdentityDispatchQueue.concurrentPerform (every iteration)", captured: "the call",
            expected: { $0 },
            observe: { submitter in
                let seen = LockedValue<[Identity?]>([])
                IdentityContext.withThreadIdentity(submitter) {
                    IdentityDispatchQueue.concurrentPerform(iterations: 16) { _ in
                        let identity = current
                        seen.withLock { $0.append(identity) }
                    }
                }
                return seen.withLock { $0 }
            }),
        PropagationCheck(
            mechanism: "IdentityWorkItem (created, then submitted under another identity)", captured: "creation",
            expected: { $0 },
            observe: { creator in
                await collectReports(2) { report in
                    let item = IdentityContext.withThreadIdentity(creator) {
                        IdentityWorkItem { report(current) }
                    }
                    IdentityContext.withThreadIdentity(other) {
                        concurrent.async(execute: item)
                    }
                    // The same item performed directly under yet another identity still runs as its creator.
                    let direct = IdentityContext.withThreadIdentity(creator) { IdentityWorkItem { report(current) } }
                    IdentityContext.withThreadIdentity(other) { direct.perform() }
                }
            }),
        PropagationCheck(
            mechanism: "DispatchGroup.notify(queue: IdentityDispatchQueue)", captured: "notify",
            expected: { $0 },
            observe: { notifier in
                await collectReports(1) { report in
                    let group = DispatchGroup()
                    IdentityContext.withThreadIdentity(other) {
                        concurrent.async(group: group) {}
                    }
                    IdentityContext.withThreadIdentity(notifier) {
                        group.notify(queue: serial) { report(current) }
                    }
                }
            }),
        sourceHandler("dispatch source handler, flow: .inherit", captured: "handler set (opt-in)", flow: .inherit),
        sourceHandler("dispatch source handler, not opted in (flow: .suppress)", captured: "nothing", flow: .suppress),
    ]

    /// A timer whose handler is set under the submitter's identity with `flow`, fired once.
    static func sourceHandler(_ mechanism: String, captured: String, flow: IdentityFlow) -> PropagationCheck {
        PropagationCheck(
            mechanism: mechanism, captured: captured,
            expected: { setter in flow == .suppress ? nil : setter },
            observe: { setter in
                await collectReports(1) { report in
                    let timer = SendableSource(serial.makeTimerSource())
                    IdentityContext.withThreadIdentity(setter) {
                        timer.source.setEventHandler(flow: flow) {
                            report(current)
                            timer.source.cancel()
                        }
                    }
                    timer.source.schedule(deadline: .now())
                    timer.source.resume()
                }
            })
    }

    // MARK: Operation queues

    static let operations: IdentityOperationQueue = {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 4
        return queue
    }()

    static let operationChecks: [PropagationCheck] = [
        .inheriting("IdentityOperationQueue.addOperation(Operation subclass)", at: "enqueue") { report in
            operations.addOperation(ReportingOperation(report))
        },
        .inheriting("IdentityOperationQueue.addOperation(block)", at: "enqueue") { report in
            operations.addOperation { report(current) }
        },
        .inheriting("IdentityOperationQueue.addOperations", at: "enqueue", count: 2) { report in
            operations.addOperations([ReportingOperation(report), BlockOperation { report(current) }], waitUntilFinished: false)
        },
        .inheriting("IdentityOperationQueue.addBarrierBlock", at: "enqueue") { report in
            operations.addBarrierBlock { report(current) }
        },
    ]

    // MARK: Swift concurrency

    static let concurrencyChecks: [PropagationCheck] = [
        .inheriting("Task {} inside an IdentityDispatchQueue block", at: "creation") { report in
            concurrent.async {
                Task { report(current) }
            }
        },
        .inheriting("Task {} inside an IdentityOperationQueue operation", at: "creation") { report in
            operations.addOperation {
                Task { report(current) }
            }
        },
        PropagationCheck(
            mechanism: "Task {} / async let / task-group child in an async scope", captured: "creation",
            expected: { $0 },
            observe: { submitter in
                await IdentityContext.withThreadIdentity(submitter) {
                    let unstructured = await Task { current }.value
                    async let bound = current
                    let children = await withTaskGroup(of: Identity?.self) { group in
                        for _ in 0..<4 { group.addTask { current } }
                        return await group.reduce(into: [Identity?]()) { $0.append($1) }
                    }
                    let afterHop = await HopActor().read()
                    return [unstructured, await bound, afterHop] + children
                }
            }),
    ]

    // MARK: What does not propagate

    static let unwrappedChecks: [PropagationCheck] = [
        .notCarried("Task.detached") { report in
            Task.detached { report(current) }
        },
        .notCarried("raw DispatchQueue.async") { report in
            DispatchQueue.global().async { report(current) }
        },
        .notCarried("raw Thread") { report in
            Thread { report(current) }.start()
        },
        .inheriting("Task.detached with IdentitySnapshot", at: "capture") { report in
            let snapshot = IdentitySnapshot.capture()
            Task.detached { await snapshot.run { () async -> Void in report(current) } }
        },
        .inheriting("raw Thread with IdentitySnapshot", at: "capture") { report in
            let snapshot = IdentitySnapshot.capture()
            Thread { snapshot.run { report(current) } }.start()
        },
    ]

    // MARK: Flow overrides

    static let flowChecks: [PropagationCheck] = [
        PropagationCheck(
            mechanism: "flow: .suppress (async, sync, operation, work item)", captured: "—",
            expected: { _ in nil },
            observe: under { _ in
                await collectReports(4) { report in
                    concurrent.async(flow: .suppress) { report(current) }
                    report(serial.sync(flow: .suppress) { current })
                    operations.addOperation(flow: .suppress) { report(current) }
                    concurrent.async(execute: IdentityWorkItem(flow: .suppress) { report(current) })
                }
            }),
        PropagationCheck(
            mechanism: "flow: .assign(x) (async, sync, operation, work item)", captured: "—",
            expected: { _ in other },
            observe: under { _ in
                await collectReports(4) { report in
                    concurrent.async(flow: .assign(other)) { report(current) }
                    report(serial.sync(flow: .assign(other)) { current })
                    operations.addOperation(flow: .assign(other)) { report(current) }
                    concurrent.async(execute: IdentityWorkItem(flow: .assign(other)) { report(current) })
                }
            }),
    ]

    // MARK: Building blocks

    typealias Report = PropagationCheck.Report

    static var current: Identity? { IdentityContext.currentThreadIdentity }


    /// Runs `observe` inside the submitter's scope.
    static func under(
        _ observe: @escaping @Sendable (Identity?) async -> [Identity?]
    ) -> @Sendable (Identity?) async -> [Identity?] {
        { submitter in await IdentityContext.withThreadIdentity(submitter) { await observe(submitter) } }
    }

}

/// An `Operation` subclass that reports the identity its `main()` observes.
final class ReportingOperation: Operation, @unchecked Sendable {
    private let report: PropagationTable.Report

    init(_ report: @escaping PropagationTable.Report) {
        self.report = report
    }

    override func main() {
        report(IdentityContext.currentThreadIdentity)
    }
}

/// Dispatch sources are thread-safe but not marked `Sendable` in every Dispatch overlay.
struct SendableSource: @unchecked Sendable {
    let source: any DispatchSourceTimer
    init(_ source: any DispatchSourceTimer) { self.source = source }
}

/// An actor hop: the identity survives it.
actor HopActor {
    func read() -> Identity? { IdentityContext.currentThreadIdentity }
}
