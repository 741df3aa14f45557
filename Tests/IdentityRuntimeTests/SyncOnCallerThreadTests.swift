#if canImport(CDispatch)
import CDispatch
#endif
import Dispatch
import Foundation
import IdentityTesting
import Synchronization
import Testing
@testable import IdentityRuntime

/// What a `sync` block observes when libdispatch runs it on the calling thread (every queue but the main
/// one): the same as anywhere else. It runs in a scope of its own, so an unscoped change inside stays inside
/// (the caller, the caller's earlier tasks and the thread are as they were afterwards) while a task created
/// after the change keeps the changed identity for good.
@Suite("sync on the caller's thread: the block's own scope")
struct SyncOnCallerThreadTests {
    let serial = IdentityDispatchQueue(label: "sync.caller.serial")
    let concurrent = IdentityDispatchQueue(label: "sync.caller.concurrent", attributes: .concurrent)

    @Test("the block runs on the caller's thread and observes the caller's identity, scoped or unscoped",
          arguments: Accounts.submitters)
    func observesCaller(caller: Identity?) async {
        let seen = await onRawThread { [serial, concurrent] in
            let thread = pthread_self()
            let scoped = IdentityContext.withThreadIdentity(caller) {
                [serial, concurrent].map { queue in
                    queue.sync { (pthread_equal(pthread_self(), thread) != 0, current) }
                }
            }
            // Outside every scope: the thread's unscoped identity is the caller's.
            IdentityContext.setCurrentThreadIdentity(caller)
            defer { IdentityContext.setCurrentThreadIdentity(nil) }
            let unscoped = serial.sync { (pthread_equal(pthread_self(), thread) != 0, current) }
            return (scoped + [unscoped]).map { "\($0.0) \(String(describing: $0.1))" }
        }
        #expect(seen == Array(repeating: "true \(String(describing: caller))", count: 3))
    }

    @Test("flow: .suppress and .assign give the block nil and the assigned identity; the caller keeps its own")
    func flowOnCallerThread() async {
        let seen = await onRawThread { [serial] in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                [serial.sync(flow: .suppress) { current }, serial.sync(flow: .assign(Accounts.bob)) { current },
                 serial.sync(flow: .assign(Accounts.alice)) { current }, current]
            }
        }
        #expect(seen == [nil, Accounts.bob, Accounts.alice, Accounts.alice])
    }

    @Test("an unscoped change inside the block does not reach the caller after sync returns",
          arguments: Accounts.submitters)
    func unscopedChangeStaysInside(caller: Identity?) async {
        let seen = await onRawThread { [serial] in
            // Caller in a scope.
            let scoped = IdentityContext.withThreadIdentity(caller) {
                let inside = serial.sync {
                    IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                    return current
                }
                return [inside, current]
            }
            // Caller outside every scope, with an unscoped identity of its own.
            IdentityContext.setCurrentThreadIdentity(caller)
            let inside = serial.sync {
                IdentityContext.setCurrentThreadIdentity(Accounts.carol)
                return current
            }
            let after = current
            IdentityContext.setCurrentThreadIdentity(nil)
            return scoped + [inside, after]
        }
        #expect(seen == [Accounts.bob, caller, Accounts.carol, caller])
    }

    @Test("an unscoped change inside the block from async code does not reach the calling task")
    func unscopedChangeFromTask() async {
        let seen = await IdentityContext.withThreadIdentity(Accounts.alice) { () async -> [Identity?] in
            let inside = serial.sync {
                IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                return current
            }
            return [inside, current]
        }
        #expect(seen == [Accounts.bob, Accounts.alice])
    }

    @Test("a task created in the block inherits the block's identity, before and after an unscoped change")
    func taskInheritsBlockIdentity() async {
        let (before, after) = await onRawThread { [serial] in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                let tasks = serial.sync {
                    let before = Task { current }
                    IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                    let after = Task { current }
                    return (before, after)
                }
                // The caller changes its own identity once the block has returned: tasks of the block keep
                // the block's.
                IdentityContext.setCurrentThreadIdentity(Accounts.carol)
                return tasks
            }
        }
        // The tasks read once sync has returned and the caller has changed: the block's frame, not the caller's.
        #expect(await after.value == Accounts.bob)
        #expect(await before.value == Accounts.bob)
    }

    @Test("a task the caller created before sync does not observe the block's unscoped change")
    func callerTaskUnaffected() async {
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        let task = await onRawThread { [serial] in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                let read = DispatchSemaphore(value: 0)
                let task = Task { () -> Identity? in
                    for await _ in gate { break }
                    defer { read.signal() }
                    return current
                }
                serial.sync {
                    IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                    // The earlier task reads while the block still runs under bob.
                    openGate.yield()
                    read.wait()
                }
                return task
            }
        }
        #expect(await task.value == Accounts.alice)
    }

    @Test("nested sync: each block has its own scope, each level sees its own identity again afterwards")
    func nestedSync() async {
        let seen = await onRawThread { [serial, concurrent] in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                let levels = serial.sync { () -> [Identity?] in
                    let inner = concurrent.sync(flow: .assign(Accounts.bob)) { () -> [Identity?] in
                        let entry = current
                        IdentityContext.setCurrentThreadIdentity(Accounts.carol)
                        let innermost = concurrent.sync { current }
                        return [entry, innermost, current]
                    }
                    return inner + [current]
                }
                return levels + [current]
            }
        }
        #expect(seen == [Accounts.bob, Accounts.carol, Accounts.carol, Accounts.alice, Accounts.alice])
    }

    @Test("sync from inside an async block of the same concurrent queue; the worker is clean afterwards",
          arguments: Accounts.submitters)
    func syncFromOwnAsyncBlock(submitter: Identity?) async {
        let seen: [Identity?] = await observe { report in
            IdentityContext.withThreadIdentity(submitter) {
                concurrent.async {
                    let inside = concurrent.sync {
                        IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                        return current
                    }
                    report([inside, current])
                }
            }
        }
        #expect(seen == [Accounts.bob, submitter])
        let raw: Identity? = await observe { report in serial.underlying.async { report(current) } }
        #expect(raw == nil)
    }

    /// Which thread runs the block is libdispatch's choice (the main thread on Apple platforms; on Linux the
    /// caller's when the main queue is idle): either way it is a main-queue block under the caller's identity.
    @Test("the main queue from another thread: a main-queue block under the caller's identity, the caller unchanged")
    func mainQueueFromAnotherThread() async {
        let seen = await onRawThread { () -> [String] in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                let inside = IdentityDispatchQueue.main.sync {
                    let observed = [String(IdentityContext.isOnMainThread), String(describing: current)]
                    IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                    return observed
                }
                return inside + [String(describing: current)]
            }
        }
        let alice = String(describing: Accounts.alice as Identity?)
        #expect(seen == ["true", alice, alice])
        // The thread that ran the main-queue block is left as it was.
        let main: Identity? = await observe { report in DispatchQueue.main.async { report(current) } }
        #expect(main == nil)
    }

    @Test("a caller with no identity: the block and its tasks observe none, and the block's change stays inside")
    func callerWithoutIdentity() async {
        let (inside, task, after) = await onRawThread { [serial] in
            let (inside, task) = serial.sync {
                let inside = current
                IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                return (inside, Task { current })
            }
            return (inside, task, current)
        }
        #expect(inside == nil)
        #expect(after == nil)
        #expect(await task.value == Accounts.bob)
    }

    #if canImport(CDispatch)
    @Test("global(qos:) submits to the very global queue of that class, and carries the identity",
          arguments: [DispatchQoS.QoSClass.background, .utility, .default, .userInitiated, .userInteractive,
                      .unspecified])
    func globalQueues(qos: DispatchQoS.QoSClass) async {
        let seen: [String] = await observe { report in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                IdentityDispatchQueue.global(qos: qos).async {
                    let label = String(cString: CDispatch.dispatch_queue_get_label(nil))
                    report([label, String(describing: current)])
                }
            }
        }
        #expect(seen == [DispatchQueue.global(qos: qos).label, String(describing: Accounts.alice as Identity?)])
    }
    #endif
}

/// Many raw threads, each calling `sync` in a loop under identities that change between and inside the calls.
@Suite("Stress: threads × sync with changing identities", .serialized)
struct SyncStressTests {
    static let identities = Accounts.many(8)

    final class Counters: Sendable {
        let wrong = Atomic<Int>(0)
        let calls = Atomic<Int>(0)
    }

    @Test("every block observes its caller's identity; every caller sees its own again", .timeLimit(.minutes(5)),
          arguments: [1, 2, 4, 8])
    func stress(threads: Int) async {
        let serial = IdentityDispatchQueue(label: "sync.stress.serial")
        let concurrent = IdentityDispatchQueue(label: "sync.stress.concurrent", attributes: .concurrent)
        let rounds = Sanitizers.isThreadSanitizerActive ? 500 : 5_000
        let counters = Counters()
        let identities = Self.identities
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<threads {
                group.addTask {
                    await onRawThread {
                        for round in 0..<rounds {
                            let identity = identities[(thread &+ round) % identities.count]
                            let other = identities[(thread &+ round &+ 1) % identities.count]
                            let queue = round.isMultiple(of: 2) ? serial : concurrent
                            let check = { (expected: Identity?) in
                                if current != expected { counters.wrong.add(1, ordering: .relaxed) }
                            }
                            if round.isMultiple(of: 3) {
                                // Unscoped at top level: the caller's identity is the thread's own.
                                IdentityContext.setCurrentThreadIdentity(identity)
                                queue.sync {
                                    check(identity)
                                    IdentityContext.setCurrentThreadIdentity(other)
                                    check(other)
                                }
                                check(identity)
                                IdentityContext.setCurrentThreadIdentity(nil)
                            } else {
                                IdentityContext.withThreadIdentity(identity) {
                                    queue.sync {
                                        check(identity)
                                        if round.isMultiple(of: 5) { IdentityContext.setCurrentThreadIdentity(other) }
                                        let expected = round.isMultiple(of: 5) ? other : identity
                                        // Nested on the concurrent queue: a nested sync on the serial one would deadlock.
                                        concurrent.sync(flow: .assign(identity)) { check(identity) }
                                        check(expected)
                                    }
                                    check(identity)
                                }
                            }
                            check(nil)
                            counters.calls.add(1, ordering: .relaxed)
                        }
                    }
                }
            }
        }
        #expect(counters.calls.load(ordering: .relaxed) == threads * rounds)
        #expect(counters.wrong.load(ordering: .relaxed) == 0)
    }
}
