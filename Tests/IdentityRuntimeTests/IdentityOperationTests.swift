import Foundation
import Testing
@testable import IdentityRuntime

/// An `IdentityOperation` subclass that records what `main()` observes, changes the identity without a
/// scope when asked, and starts a task that reports what it inherited.
final class RecordingIdentityOperation: IdentityOperation, @unchecked Sendable {
    let label: String
    let log: Log
    let override: Identity??
    let taskDone = DispatchSemaphore(value: 0)

    init(_ label: String, log: Log, override: Identity?? = .none) {
        self.label = label
        self.log = log
        self.override = override
    }

    override func main() {
        log.append(label, IdentityContext.currentThreadIdentity)
        if case let .some(identity) = override {
            IdentityContext.setCurrentThreadIdentity(identity)
            log.append("\(label).after-override", IdentityContext.currentThreadIdentity)
        }
        let log = self.log
        let label = self.label
        let done = taskDone
        Task {
            log.append("\(label).task", IdentityContext.currentThreadIdentity)
            done.signal()
        }
    }
}

@Suite("IdentityOperation: an operation base class that carries identity without a carrier")
struct IdentityOperationTests {
    @Test("through IdentityOperationQueue it runs under the enqueuer's identity, captured at enqueue",
          arguments: Accounts.submitters)
    func enqueuerIdentity(enqueuer: Identity?) {
        let queue = IdentityOperationQueue()
        queue.isSuspended = true
        let log = Log()
        // Created under bob, enqueued under the submitter: the enqueue wins.
        let operation = IdentityContext.withThreadIdentity(Accounts.bob) { RecordingIdentityOperation("op", log: log) }
        IdentityContext.withThreadIdentity(enqueuer) { queue.addOperation(operation) }
        // The queue runs it after the enqueuer's scope ended.
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        operation.taskDone.wait()
        #expect(log.identity(of: "op") == .some(enqueuer))
        #expect(log.identity(of: "op.task") == .some(enqueuer))
        // The queue schedules the operation itself, not a carrier.
        #expect(operation.isFinished)
    }

    @Test("on a plain OperationQueue, or started directly, it runs under its creator's identity")
    func creatorIdentity() {
        let log = Log()
        let plain = OperationQueue()
        let (queued, direct) = IdentityContext.withThreadIdentity(Accounts.carol) {
            (RecordingIdentityOperation("queued", log: log), RecordingIdentityOperation("direct", log: log))
        }
        IdentityContext.withThreadIdentity(Accounts.bob) { plain.addOperation(queued) }
        plain.waitUntilAllOperationsAreFinished()
        direct.start()
        queued.taskDone.wait()
        direct.taskDone.wait()
        #expect(log.identity(of: "queued") == .some(Accounts.carol))
        #expect(log.identity(of: "direct") == .some(Accounts.carol))
        #expect(IdentityContext.currentThreadIdentity == nil)
    }

    @Test("an unscoped change lasts for the rest of the operation only; tasks created after it inherit it")
    func unscopedOverride() {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let log = Log()
        let first = RecordingIdentityOperation("first", log: log, override: .some(Accounts.bob))
        let second = RecordingIdentityOperation("second", log: log)
        IdentityContext.withThreadIdentity(Accounts.alice) {
            queue.addOperations([first, second], waitUntilFinished: true)
        }
        first.taskDone.wait()
        second.taskDone.wait()
        #expect(log.identity(of: "first") == .some(Accounts.alice))
        #expect(log.identity(of: "first.after-override") == .some(Accounts.bob))
        #expect(log.identity(of: "first.task") == .some(Accounts.bob))
        // The same worker thread, next operation: nothing leaked.
        #expect(log.identity(of: "second") == .some(Accounts.alice))
    }

    @Test("dependencies and cancellation behave as on Operation")
    func dependenciesAndCancellation() {
        let queue = IdentityOperationQueue()
        let log = Log()
        let first = RecordingIdentityOperation("first", log: log)
        let second = RecordingIdentityOperation("second", log: log)
        let cancelled = RecordingIdentityOperation("cancelled", log: log)
        second.addDependency(first)
        cancelled.cancel()
        IdentityContext.withThreadIdentity(Accounts.alice) {
            queue.addOperation(second)
            queue.addOperation(cancelled)
            queue.addOperation(first)
        }
        queue.waitUntilAllOperationsAreFinished()
        #expect(log.labels.filter { !$0.contains(".") } == ["first", "second"])
        #expect(cancelled.isFinished && cancelled.isCancelled)
    }

    @Test("strict mode checks it like any other unit")
    func strictMode() async {
        let (_, issues) = await capturingRuntimeIssues(
            kinds: ["misattributed", "identityLeaked", "unitNeverRan", "unitRanTwice"]
        ) {
            let queue = IdentityOperationQueue()
            let log = Log()
            let operation = RecordingIdentityOperation("strict", log: log)
            IdentityStrictMode.checking {
                IdentityContext.withThreadIdentity(Accounts.alice) { queue.addOperation(flow: .inherit, operation) }
            }
            queue.waitUntilAllOperationsAreFinished()
            operation.taskDone.wait()
            #expect(log.identity(of: "strict") == .some(Accounts.alice))
        }
        #expect(issues.filter { $0.site?.fileID.description == "IdentityRuntimeTests/IdentityOperationTests.swift" }.isEmpty)
    }
}
