import Dispatch
import Foundation
import IdentityTesting
import Synchronization
import Testing
@testable import IdentityRuntime

/// The legacy setter, called from synchronous code the way a task's synchronous callee calls it.
private func setUnscoped(_ identity: Identity?) {
    IdentityContext.setCurrentThreadIdentity(identity)
}

/// A task executor that runs every job at once on the thread that enqueues it: a task created with it as
/// its preference starts inside its creator's synchronous scope, on the scope's own thread.
private final class InlineTaskExecutor: TaskExecutor, @unchecked Sendable {
    func enqueue(_ job: consuming ExecutorJob) {
        job.runSynchronously(on: asUnownedTaskExecutor())
    }
}

/// Only the task (or thread) that opened a synchronous scope may change it with the unscoped setter; every
/// other task that sees the scope's binding is refused, and nothing it tries reaches another task or its
/// creator.
@Suite("The unscoped setter changes only the scope its own task opened")
struct UnscopedSetterTaskOwnershipTests {
    /// Captures the refusals reported for `marker`, an identity only one test uses.
    private static func refusals<R>(
        of marker: Identity, _ body: () async -> R
    ) async -> (R, [RuntimeIssue]) {
        await IdentityStrictMode.capturingIssues(matching: { $0 == .unscopedChangeInTask(marker) }, body)
    }

    @Test("a Task.immediate started in a synchronous scope inside a task is refused; the scope's own task is not")
    func immediateTaskInsideScopeOfATask() async {
        let marker = Identity("immediate-in-task-scope@contoso.com")
        let (seen, issues) = await Self.refusals(of: marker) { () async -> [Identity?] in
            var immediate: Task<Identity?, Never>?
            let inScope = IdentityContext.withThreadIdentity(Accounts.alice) { () -> [Identity?] in
                immediate = Task.immediate { () -> Identity? in
                    setUnscoped(marker)
                    return current
                }
                let afterImmediate = current
                setUnscoped(Accounts.bob)
                return [afterImmediate, current]
            }
            let immediateSaw = await immediate?.value
            return inScope + [immediateSaw, current]
        }
        // The immediate task ran its first part inside the scope, before the scope's own change.
        #expect(seen == [Accounts.alice, Accounts.bob, Accounts.alice, nil])
        #expect(issues == [.unscopedChangeInTask(marker)])
    }

    @Test("a synchronous scope inside a Task.immediate belongs to the immediate task, and nests the same way")
    func scopesInsideImmediateTasks() async {
        let marker = Identity("nested-immediate-marker@contoso.com")
        let record = LockedValue<[String: Identity?]>([:])
        let (_, issues) = await Self.refusals(of: marker) { () async in
            let tasks = LockedValue<[Task<Void, Never>]>([])
            IdentityContext.withThreadIdentity(Accounts.alice) {
                let immediate = Task.immediate {
                    IdentityContext.withThreadIdentity(Accounts.bob) {
                        setUnscoped(Accounts.carol)
                        record.withLock { $0["inner scope after own change"] = current }
                        let innermost = Task.immediate {
                            setUnscoped(marker)
                            record.withLock { $0["innermost task"] = current }
                        }
                        tasks.withLock { $0.append(innermost) }
                        record.withLock { $0["inner scope after innermost task"] = current }
                    }
                    record.withLock { $0["immediate task after its scope"] = current }
                    setUnscoped(marker)
                    record.withLock { $0["immediate task after a refused change"] = current }
                }
                tasks.withLock { $0.append(immediate) }
                record.withLock { $0["outer scope"] = current }
            }
            for task in tasks.withLock({ $0 }) { await task.value }
        }
        let seen = record.withLock { $0 }
        #expect(seen["inner scope after own change"] == .some(Accounts.carol))
        #expect(seen["innermost task"] == .some(Accounts.carol))
        #expect(seen["inner scope after innermost task"] == .some(Accounts.carol))
        #expect(seen["immediate task after its scope"] == .some(Accounts.alice))
        #expect(seen["immediate task after a refused change"] == .some(Accounts.alice))
        #expect(seen["outer scope"] == .some(Accounts.alice))
        // The innermost task's change and the immediate task's change outside its own scope.
        #expect(issues == [.unscopedChangeInTask(marker), .unscopedChangeInTask(marker)])
        #expect(current == nil)
    }

    @Test("inside a queue's sync block called from a task, the block's own change holds and an immediate task's is refused")
    func syncBlockCalledFromATask() async {
        let queue = IdentityDispatchQueue(label: "unscoped-ownership-sync")
        let marker = Identity("sync-block-immediate@contoso.com")
        let (seen, issues) = await Self.refusals(of: marker) { () async -> [Identity?] in
            var immediate: Task<Identity?, Never>?
            let inScope = IdentityContext.withThreadIdentity(Accounts.alice) { () -> [Identity?] in
                let inBlock = queue.sync { () -> [Identity?] in
                    setUnscoped(Accounts.bob)
                    immediate = Task.immediate { () -> Identity? in
                        setUnscoped(marker)
                        return current
                    }
                    return [current]
                }
                return inBlock + [current]
            }
            return inScope + [await immediate?.value, current]
        }
        #expect(seen == [Accounts.bob, Accounts.alice, Accounts.bob, nil])
        #expect(issues == [.unscopedChangeInTask(marker)])
    }

    @Test("a unit on a queue takes its own change; a Task.immediate it starts is refused and sees the change")
    func unitOnAQueue() async {
        let queue = IdentityDispatchQueue(label: "unscoped-ownership-unit")
        let marker = Identity("unit-immediate@contoso.com")
        let (seen, issues) = await Self.refusals(of: marker) { () async -> [Identity?] in
            await withCheckedContinuation { continuation in
                IdentityContext.withThreadIdentity(Accounts.alice) {
                    queue.async {
                        setUnscoped(Accounts.carol)
                        let immediate = Task.immediate { () -> Identity? in
                            setUnscoped(marker)
                            return current
                        }
                        let unit = current
                        Task {
                            continuation.resume(returning: [unit, await immediate.value])
                        }
                    }
                }
            }
        }
        #expect(seen == [Accounts.carol, Accounts.carol])
        #expect(issues == [.unscopedChangeInTask(marker)])
    }

    @Test("a task created in a scope that outlives it is refused and leaves its creator untouched")
    func taskOutlivingItsScope() async {
        let marker = Identity("outliving-task@contoso.com")
        let gate = LockedValue(false)
        let (seen, issues) = await Self.refusals(of: marker) { () async -> [Identity?] in
            let task = IdentityContext.withThreadIdentity(Accounts.alice) {
                Task { () -> Identity? in
                    while !gate.withLock({ $0 }) { await Task.yield() }
                    setUnscoped(marker)
                    return current
                }
            }
            gate.withLock { $0 = true }
            return [await task.value, current]
        }
        #expect(seen == [Accounts.alice, nil])
        #expect(issues == [.unscopedChangeInTask(marker)])
    }

    @Test("a detached task started in a scope inherits nothing and may change nothing")
    func detachedTask() async {
        let marker = Identity("detached-task@contoso.com")
        let (seen, issues) = await Self.refusals(of: marker) { () async -> [Identity?] in
            let task = IdentityContext.withThreadIdentity(Accounts.alice) {
                Task.detached { () -> Identity? in
                    setUnscoped(marker)
                    return current
                }
            }
            return [await task.value, current]
        }
        #expect(seen == [nil, nil])
        #expect(issues == [.unscopedChangeInTask(marker)])
    }

    @Test("a task an inline executor starts on the scope's own thread is refused, in a task or on a raw thread")
    func inlineExecutorTask() async {
        let marker = Identity("inline-executor-task@contoso.com")
        let executor = InlineTaskExecutor()
        @Sendable func attempt() -> [Identity?] {
            IdentityContext.withThreadIdentity(Accounts.alice) { () -> [Identity?] in
                let thread = pthread_self()
                let sameThread = LockedValue(false)
                Task(executorPreference: executor) {
                    sameThread.withLock { $0 = pthread_equal(thread, pthread_self()) != 0 }
                    setUnscoped(marker)
                }
                #expect(sameThread.withLock { $0 })
                let afterTask = current
                // The scope's own thread and task still may.
                setUnscoped(Accounts.bob)
                return [afterTask, current]
            }
        }
        let (seen, issues) = await Self.refusals(of: marker) { () async -> [[Identity?]] in
            let inTask = attempt()
            let onThread = await onRawThread { attempt() }
            return [inTask, onThread]
        }
        #expect(seen == [[Accounts.alice, Accounts.bob], [Accounts.alice, Accounts.bob]])
        #expect(issues == [.unscopedChangeInTask(marker), .unscopedChangeInTask(marker)])
    }

    @Test("a Task.immediate on a raw thread with a root identity neither sees nor changes it")
    func immediateTaskOnARawThreadWithARootIdentity() async {
        let marker = Identity("raw-thread-root-immediate@contoso.com")
        let (seen, issues) = await Self.refusals(of: marker) { () async -> [Identity?] in
            await onRawThread { () -> [Identity?] in
                setUnscoped(Accounts.alice)
                let immediate = LockedValue<Identity??>(nil)
                Task.immediate {
                    setUnscoped(marker)
                    immediate.withLock { $0 = .some(current) }
                }
                let root = current
                setUnscoped(nil)
                return [immediate.withLock { $0 } ?? Accounts.bob, root, current]
            }
        }
        // The task ran its first part at once, outside every scope: no identity, and its change refused.
        #expect(seen == [nil, Accounts.alice, nil])
        #expect(issues == [.unscopedChangeInTask(marker)])
    }

    @Test("many tasks each changing their own synchronous scopes while immediate tasks try theirs: nothing crosses")
    func concurrentScopesAndImmediateTasks() async {
        let marker = Identity("concurrent-immediate@contoso.com")
        let accounts = Accounts.many(16)
        let rounds = 200
        let (mismatches, issues) = await Self.refusals(of: marker) { () async -> Int in
            await withTaskGroup(of: Int.self) { group in
                for (index, account) in accounts.enumerated() {
                    group.addTask {
                        var mismatches = 0
                        let other = accounts[(index + 1) % accounts.count]
                        for _ in 0..<rounds {
                            var immediate: Task<Identity?, Never>?
                            let seen = IdentityContext.withThreadIdentity(account) { () -> [Identity?] in
                                immediate = Task.immediate { () -> Identity? in
                                    setUnscoped(marker)
                                    await Task.yield()
                                    setUnscoped(marker)
                                    return current
                                }
                                let before = current
                                setUnscoped(other)
                                return [before, current]
                            }
                            // The immediate task shares the scope's binding: after its suspension it reads the
                            // scope's identity, changed or not yet, never its own refused one.
                            let immediateSaw = await immediate?.value
                            if seen != [account, other] || !(immediateSaw == .some(account) || immediateSaw == .some(other))
                                || current != nil {
                                mismatches += 1
                            }
                        }
                        return mismatches
                    }
                }
                return await group.reduce(0, +)
            }
        }
        #expect(mismatches == 0)
        #expect(issues.count == 2 * accounts.count * rounds)
    }
}
