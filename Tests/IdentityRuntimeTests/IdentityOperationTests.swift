import Foundation
import Testing
@testable import IdentityRuntime

/// An `IdentityOperation` subclass that records what `main()` observes, changes the identity without a
/// scope when asked, and starts a task that reports what it inherited.
final class RecordingIdentityOperation: IdentityOperation, @unchecked Sendable {
    let label: String
    let log: Log
    let override: Identity??
    /// Finishes once the task `main()` created has reported (tests await it instead of blocking a thread
    /// of the pool that task needs).
    let taskDone: AsyncStream<Void>
    private let taskDoneContinuation: AsyncStream<Void>.Continuation

    init(_ label: String, log: Log, override: Identity?? = .none) {
        self.label = label
        self.log = log
        self.override = override
        (taskDone, taskDoneContinuation) = AsyncStream.makeStream()
    }

    override func main() {
        log.append(label, IdentityContext.currentThreadIdentity)
        if case let .some(identity) = override {
            IdentityContext.setCurrentThreadIdentity(identity)
            log.append("\(label).after-override", IdentityContext.currentThreadIdentity)
        }
        let log = self.log
        let label = self.label
        let done = taskDoneContinuation
        Task {
            log.append("\(label).task", IdentityContext.currentThreadIdentity)
            done.finish()
        }
    }

    /// Waits until the task `main()` created has reported.
    func taskReported() async {
        for await _ in taskDone {}
    }
}

/// Runs `body` and waits until every operation of `queue` has finished (operations run on the queue's own
/// threads, so this blocks no thread they need).
private func runAndWait(_ queue: OperationQueue, _ body: () -> Void) {
    body()
    queue.waitUntilAllOperationsAreFinished()
}

@Suite("IdentityOperation: an operation base class that carries identity without a carrier")
struct IdentityOperationTests {
    @Test("through IdentityOperationQueue it runs under the enqueuer's identity, captured at enqueue",
          arguments: Accounts.submitters)
    func enqueuerIdentity(enqueuer: Identity?) async {
        let queue = IdentityOperationQueue()
        queue.isSuspended = true
        let log = Log()
        // Created under bob, enqueued under the submitter: the enqueue wins.
        let operation = IdentityContext.withThreadIdentity(Accounts.bob) { RecordingIdentityOperation("op", log: log) }
        runAndWait(queue) {
            IdentityContext.withThreadIdentity(enqueuer) { queue.addOperation(operation) }
            // The queue runs it after the enqueuer's scope ended.
            queue.isSuspended = false
        }
        await operation.taskReported()
        #expect(log.identity(of: "op") == .some(enqueuer))
        #expect(log.identity(of: "op.task") == .some(enqueuer))
        // The queue scheduled the operation itself, not a carrier.
        #expect(operation.isFinished)
    }

    @Test("on a plain OperationQueue, or started directly, it runs under its creator's identity")
    func creatorIdentity() async {
        let log = Log()
        let plain = OperationQueue()
        let (queued, direct) = IdentityContext.withThreadIdentity(Accounts.carol) {
            (RecordingIdentityOperation("queued", log: log), RecordingIdentityOperation("direct", log: log))
        }
        runAndWait(plain) {
            IdentityContext.withThreadIdentity(Accounts.bob) { plain.addOperation(queued) }
        }
        await Task.detached { direct.start() }.value
        await queued.taskReported()
        await direct.taskReported()
        #expect(log.identity(of: "queued") == .some(Accounts.carol))
        #expect(log.identity(of: "direct") == .some(Accounts.carol))
        #expect(log.identity(of: "direct.task") == .some(Accounts.carol))
    }

    @Test("an unscoped change lasts for the rest of the operation only; tasks created after it inherit it")
    func unscopedOverride() async {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let log = Log()
        let first = RecordingIdentityOperation("first", log: log, override: .some(Accounts.bob))
        let second = RecordingIdentityOperation("second", log: log)
        second.addDependency(first)
        runAndWait(queue) {
            IdentityContext.withThreadIdentity(Accounts.alice) { queue.addOperations([first, second], waitUntilFinished: false) }
        }
        await first.taskReported()
        await second.taskReported()
        #expect(log.identity(of: "first") == .some(Accounts.alice))
        #expect(log.identity(of: "first.after-override") == .some(Accounts.bob))
        #expect(log.identity(of: "first.task") == .some(Accounts.bob))
        // The next operation on that queue (one at a time): nothing leaked.
        #expect(log.identity(of: "second") == .some(Accounts.alice))
    }

    @Test("dependencies and cancellation behave as on Operation")
    func dependenciesAndCancellation() async {
        let queue = IdentityOperationQueue()
        let log = Log()
        let first = RecordingIdentityOperation("first", log: log)
        let second = RecordingIdentityOperation("second", log: log)
        let cancelled = RecordingIdentityOperation("cancelled", log: log)
        second.addDependency(first)
        cancelled.cancel()
        runAndWait(queue) {
            IdentityContext.withThreadIdentity(Accounts.alice) {
                queue.addOperation(second)
                queue.addOperation(cancelled)
                queue.addOperation(first)
            }
        }
        await first.taskReported()
        await second.taskReported()
        #expect(log.labels.filter { !$0.contains(".") } == ["first", "second"])
        #expect(cancelled.isFinished && cancelled.isCancelled)
    }

    @Test("strict mode checks it like any other unit")
    func strictMode() async {
        let log = Log()
        let queue = IdentityOperationQueue()
        let operation = RecordingIdentityOperation("strict", log: log)
        let (_, issues) = await capturingRuntimeIssues(
            kinds: ["misattributed", "identityLeaked", "unitNeverRan", "unitRanTwice"]
        ) {
            runAndWait(queue) {
                IdentityStrictMode.checking {
                    IdentityContext.withThreadIdentity(Accounts.alice) { queue.addOperation(flow: .inherit, operation) }
                }
            }
            await operation.taskReported()
        }
        let fromThisFile = issues.filter { $0.site?.fileID.description == "IdentityRuntimeTests/IdentityOperationTests.swift" }
        #expect(fromThisFile.isEmpty)
        #expect(log.identity(of: "strict") == .some(Accounts.alice))
        #expect(log.identity(of: "strict.task") == .some(Accounts.alice))
    }
}
