import Foundation
import Synchronization
import Testing
@testable import IdentityRuntime

/// An operation that records the identity its `main()` observes and the order it ran in.
final class RecordingOperation: Operation, @unchecked Sendable {
    let label: String
    let log: Log
    let delay: Duration

    init(_ label: String, log: Log, delay: Duration = .zero) {
        self.label = label
        self.log = log
        self.delay = delay
    }

    override func main() {
        if delay > .zero { Thread.sleep(forTimeInterval: Double(delay.components.attoseconds) / 1e18 + Double(delay.components.seconds)) }
        log.append(label, IdentityContext.currentThreadIdentity)
    }
}

/// An asynchronous operation: `start()` returns at once, work finishes later on another queue.
final class AsyncRecordingOperation: Operation, @unchecked Sendable {
    let log: Log
    private let state = LockedValue<(executing: Bool, finished: Bool)>((false, false))

    init(log: Log) { self.log = log }

    override var isAsynchronous: Bool { true }
    override var isExecuting: Bool { state.withLock { $0.executing } }
    override var isFinished: Bool { state.withLock { $0.finished } }

    override func start() {
        let startedAs = IdentityContext.currentThreadIdentity
        willChangeValue(forKey: "isExecuting")
        state.withLock { $0.executing = true }
        didChangeValue(forKey: "isExecuting")
        // Work continues on an identity-carrying queue: it captures what start() observed.
        IdentityDispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(30)) {
            self.log.append("async-start", startedAs)
            self.log.append("async-finish", IdentityContext.currentThreadIdentity)
            self.willChangeValue(forKey: "isFinished")
            self.willChangeValue(forKey: "isExecuting")
            self.state.withLock { $0 = (false, true) }
            self.didChangeValue(forKey: "isExecuting")
            self.didChangeValue(forKey: "isFinished")
        }
    }
}

final class Log: Sendable {
    private let entries = LockedValue<[(String, Identity?)]>([])
    func append(_ label: String, _ identity: Identity?) { entries.withLock { $0.append((label, identity)) } }
    var labels: [String] { entries.withLock { $0.map(\.0) } }
    func identity(of label: String) -> Identity?? { entries.withLock { $0.first { $0.0 == label }.map(\.1) } }
}

@Suite("IdentityOperationQueue keeps OperationQueue behaviour")
struct OperationQueueTests {
    @Test("operation subclasses and blocks run under the enqueuer's identity", arguments: Accounts.submitters)
    func identityAtEnqueue(enqueuer: Identity?) {
        let queue = IdentityOperationQueue()
        let log = Log()
        IdentityContext.withThreadIdentity(enqueuer) {
            queue.addOperation(RecordingOperation("op", log: log))
            queue.addOperation { log.append("block", IdentityContext.currentThreadIdentity) }
        }
        // Enqueued under another identity: captured at enqueue, not at run.
        IdentityContext.withThreadIdentity(Accounts.bob) {
            queue.addOperation(RecordingOperation("bob", log: log))
        }
        queue.waitUntilAllOperationsAreFinished()
        #expect(log.identity(of: "op") == .some(enqueuer))
        #expect(log.identity(of: "block") == .some(enqueuer))
        #expect(log.identity(of: "bob") == .some(Accounts.bob))
    }

    @Test("dependencies order operations, across queues and identities")
    func dependencies() {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 4
        let other = OperationQueue()
        let log = Log()
        let first = RecordingOperation("first", log: log, delay: .milliseconds(30))
        let second = RecordingOperation("second", log: log)
        let third = RecordingOperation("third", log: log)
        second.addDependency(first)
        third.addDependency(second)
        IdentityContext.withThreadIdentity(Accounts.alice) { queue.addOperation(third) }
        IdentityContext.withThreadIdentity(Accounts.bob) { queue.addOperation(second) }
        other.addOperation(first)
        queue.waitUntilAllOperationsAreFinished()
        other.waitUntilAllOperationsAreFinished()
        #expect(log.labels == ["first", "second", "third"])
        #expect(log.identity(of: "first") == .some(nil))
        #expect(log.identity(of: "second") == .some(Accounts.bob))
        #expect(log.identity(of: "third") == .some(Accounts.alice))
        #expect(second.isFinished && third.isFinished)
    }

    @Test("an operation of ours can be a dependency of a plain queue's operation")
    func dependencyOfForeignOperation() {
        let queue = IdentityOperationQueue()
        let plain = OperationQueue()
        let log = Log()
        let ours = RecordingOperation("ours", log: log, delay: .milliseconds(20))
        let theirs = RecordingOperation("theirs", log: log)
        theirs.addDependency(ours)
        plain.addOperation(theirs)
        IdentityContext.withThreadIdentity(Accounts.alice) { queue.addOperation(ours) }
        plain.waitUntilAllOperationsAreFinished()
        #expect(log.labels == ["ours", "theirs"])
        #expect(log.identity(of: "ours") == .some(Accounts.alice))
    }

    @Test("cancelled operations do not run main(), finish, and release their dependents")
    func cancellation() {
        let queue = IdentityOperationQueue()
        queue.isSuspended = true
        let log = Log()
        let cancelled = RecordingOperation("cancelled", log: log)
        let dependent = RecordingOperation("dependent", log: log)
        dependent.addDependency(cancelled)
        let completion = LockedValue(false)
        cancelled.completionBlock = { completion.withLock { $0 = true } }
        IdentityContext.withThreadIdentity(Accounts.alice) {
            queue.addOperation(cancelled)
            queue.addOperation(dependent)
        }
        cancelled.cancel()
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        cancelled.waitUntilFinished()
        #expect(cancelled.isCancelled && cancelled.isFinished)
        #expect(log.labels == ["dependent"])
        #expect(log.identity(of: "dependent") == .some(Accounts.alice))
        #expect(completion.withLock { $0 })
    }

    @Test("cancelAllOperations cancels the operations the queue carries")
    func cancelAll() {
        let queue = IdentityOperationQueue()
        queue.isSuspended = true
        let log = Log()
        let operations = (0..<5).map { RecordingOperation("op\($0)", log: log) }
        for operation in operations { queue.addOperation(operation) }
        queue.addOperation { log.append("block", nil) }
        queue.cancelAllOperations()
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        #expect(operations.allSatisfy { $0.isCancelled && $0.isFinished })
        #expect(log.labels.isEmpty)
    }

    @Test("isSuspended holds work back; maxConcurrentOperationCount = 1 runs in enqueue order")
    func suspensionAndSerialOrder() {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let log = Log()
        let accounts = Accounts.many(6)
        for (index, account) in accounts.enumerated() {
            IdentityContext.withThreadIdentity(account) {
                if index.isMultiple(of: 2) {
                    queue.addOperation(RecordingOperation("\(index)", log: log))
                } else {
                    queue.addOperation { log.append("\(index)", IdentityContext.currentThreadIdentity) }
                }
            }
        }
        Thread.sleep(forTimeInterval: 0.02)
        #expect(log.labels.isEmpty)
        #expect(queue.operationCount == accounts.count)
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        #expect(log.labels == accounts.indices.map(String.init))
        for (index, account) in accounts.enumerated() {
            #expect(log.identity(of: "\(index)") == .some(account))
        }
    }

    @Test("maxConcurrentOperationCount is respected")
    func concurrencyLimit() {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 2
        let running = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
        for _ in 0..<12 {
            queue.addOperation(BlockOperation {
                let now = running.add(1, ordering: .relaxed).newValue
                peak.max(now, ordering: .relaxed)
                Thread.sleep(forTimeInterval: 0.005)
                running.subtract(1, ordering: .relaxed)
            })
        }
        queue.waitUntilAllOperationsAreFinished()
        #expect(peak.load(ordering: .relaxed) <= 2)
        #expect(peak.load(ordering: .relaxed) >= 1)
    }

    @Test("queue priority orders ready operations on a serial queue")
    func priorities() {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let log = Log()
        let low = RecordingOperation("low", log: log)
        low.queuePriority = .veryLow
        let high = RecordingOperation("high", log: log)
        high.queuePriority = .veryHigh
        queue.addOperation(low)
        queue.addOperation(high)
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        #expect(log.labels == ["high", "low"])
    }

    @Test("addOperations(waitUntilFinished: true) returns after all ran, under the enqueuer's identity")
    func addOperationsWaits() {
        let queue = IdentityOperationQueue()
        let log = Log()
        let operations = (0..<4).map { RecordingOperation("op\($0)", log: log, delay: .milliseconds(5)) }
        IdentityContext.withThreadIdentity(Accounts.carol) {
            queue.addOperations(operations, waitUntilFinished: true)
        }
        #expect(operations.allSatisfy { $0.isFinished })
        #expect(Set(log.labels) == Set(operations.map(\.label)))
        for operation in operations { #expect(log.identity(of: operation.label) == .some(Accounts.carol)) }
    }

    @Test("a barrier block runs after earlier operations and before later ones")
    func barrier() {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 4
        let log = Log()
        for index in 0..<3 { queue.addOperation(RecordingOperation("before\(index)", log: log, delay: .milliseconds(10))) }
        IdentityContext.withThreadIdentity(Accounts.bob) {
            queue.addBarrierBlock { log.append("barrier", IdentityContext.currentThreadIdentity) }
        }
        queue.addOperation { log.append("after", IdentityContext.currentThreadIdentity) }
        queue.waitUntilAllOperationsAreFinished()
        let labels = log.labels
        #expect(labels.count == 5)
        #expect(labels.firstIndex(of: "barrier") == 3)
        #expect(labels.last == "after")
        #expect(log.identity(of: "barrier") == .some(Accounts.bob))
        #expect(log.identity(of: "after") == .some(nil))
    }

    @Test("completion blocks run when the operation finishes")
    func completionBlocks() {
        let queue = IdentityOperationQueue()
        let log = Log()
        let operation = RecordingOperation("op", log: log)
        let done = DispatchSemaphore(value: 0)
        operation.completionBlock = { done.signal() }
        IdentityContext.withThreadIdentity(Accounts.alice) { queue.addOperation(operation) }
        #expect(done.wait(timeout: .now() + 5) == .success)
        #expect(log.identity(of: "op") == .some(Accounts.alice))
    }

    @Test("an asynchronous operation runs start() under the enqueuer's identity and counts until it finishes")
    func asynchronousOperation() {
        let queue = IdentityOperationQueue()
        queue.maxConcurrentOperationCount = 1
        let log = Log()
        let operation = AsyncRecordingOperation(log: log)
        IdentityContext.withThreadIdentity(Accounts.alice) {
            queue.addOperation(operation)
            queue.addOperation { log.append("next", IdentityContext.currentThreadIdentity) }
        }
        queue.waitUntilAllOperationsAreFinished()
        #expect(operation.isFinished)
        #expect(log.labels == ["async-start", "async-finish", "next"])
        #expect(log.identity(of: "async-start") == .some(Accounts.alice))
        #expect(log.identity(of: "async-finish") == .some(Accounts.alice))
    }

    @Test("flow: chooses another identity per operation")
    func flows() {
        let queue = IdentityOperationQueue()
        let log = Log()
        IdentityContext.withThreadIdentity(Accounts.alice) {
            queue.addOperation(flow: .suppress, RecordingOperation("suppressed", log: log))
            queue.addOperation(flow: .assign(Accounts.bob)) { log.append("assigned", IdentityContext.currentThreadIdentity) }
        }
        queue.waitUntilAllOperationsAreFinished()
        #expect(log.identity(of: "suppressed") == .some(nil))
        #expect(log.identity(of: "assigned") == .some(Accounts.bob))
    }
}
