import Dispatch
import Foundation
import IdentityRuntime

/// Rows for the rest of what Swift services run work on: actors and executors, `Task.immediate`,
/// cancellation handlers, the main actor, `AsyncStream` consumers and identity-carrying channels.
extension PropagationTable {
    /// A serial queue whose executor runs actors and preferred tasks in these rows.
    static let executorQueue = IdentityDispatchQueue(label: "propagation.executor")
    static let queueExecutor = IdentityQueueExecutor(queue: executorQueue)
    static let rawExecutor = RawQueueExecutor(label: "propagation.raw-executor")

    /// The window whose UI identity the main-actor row sets (only these rows use it).
    static let tableWindow = WindowID("propagation.table")

    // MARK: Actors and executors

    static let actorChecks: [PropagationCheck] = [
        PropagationCheck(
            mechanism: "actor on the default executor (before and after a suspension)", captured: "task creation",
            expected: { $0 },
            observe: under { _ in await DefaultExecutorActor().observeAcrossSuspension() }),
        PropagationCheck(
            mechanism: "actor on IdentityQueueExecutor (SerialExecutor on an IdentityDispatchQueue)",
            captured: "task creation", expected: { $0 },
            observe: under { _ in
                // A block of another identity on the same queue just before: it must not leak into the job.
                IdentityContext.withThreadIdentity(other) { executorQueue.async {} }
                return await QueueExecutorActor(executor: queueExecutor).observeAcrossSuspension()
            }),
        PropagationCheck(
            mechanism: "actor on a custom SerialExecutor over a raw DispatchQueue", captured: "task creation",
            expected: { $0 },
            observe: under { _ in await RawExecutorActor(executor: rawExecutor).observeAcrossSuspension() }),
        PropagationCheck(
            mechanism: "calls of two identities interleaved on one actor (default, IdentityQueueExecutor, raw queue)",
            captured: "task creation", expected: { $0 },
            observe: { submitter in
                var seen: [Identity?] = []
                seen += await interleaved(on: DefaultExecutorActor(), submitter: submitter)
                seen += await interleaved(on: QueueExecutorActor(executor: queueExecutor), submitter: submitter)
                seen += await interleaved(on: RawExecutorActor(executor: rawExecutor), submitter: submitter)
                return seen
            }),
        PropagationCheck(
            mechanism: "withTaskExecutorPreference(IdentityQueueExecutor): body and child tasks",
            captured: "task creation", expected: { $0 },
            observe: under { _ in
                await withTaskExecutorPreference(queueExecutor) {
                    let body = current
                    let children = await withTaskGroup(of: Identity?.self) { group in
                        for _ in 0..<4 { group.addTask { current } }
                        return await group.reduce(into: [Identity?]()) { $0.append($1) }
                    }
                    return [body] + children
                }
            }),
        PropagationCheck(
            mechanism: "Task(executorPreference: IdentityQueueExecutor / raw-queue executor)",
            captured: "creation", expected: { $0 },
            observe: under { _ in
                let onQueue = await Task(executorPreference: queueExecutor) { current }.value
                let onRaw = await Task(executorPreference: rawExecutor) { current }.value
                return [onQueue, onRaw]
            }),
        PropagationCheck(
            mechanism: "Task.immediate (before and after its first suspension)", captured: "creation",
            expected: { $0 },
            observe: under { _ in
                if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
                    return await Task.immediate {
                        let before = current
                        await Task.yield()
                        return [before, current]
                    }.value
                }
                return await Task { [current] }.value
            }),
        PropagationCheck(
            mechanism: "withTaskCancellationHandler handler, cancelled by code of another identity",
            captured: "nothing (runs in the canceller)", expected: { _ in other },
            observe: { submitter in
                let (started, startedContinuation) = AsyncStream<Void>.makeStream()
                let handlerSaw = LockedValue<Identity??>(nil)
                let task = IdentityContext.withThreadIdentity(submitter) {
                    Task {
                        await withTaskCancellationHandler {
                            startedContinuation.finish()
                            try? await Task.sleep(for: .seconds(3_600))
                        } onCancel: {
                            let identity = current
                            handlerSaw.withLock { $0 = .some(identity) }
                        }
                    }
                }
                for await _ in started {}
                IdentityContext.withThreadIdentity(other) { task.cancel() }
                await task.value
                return handlerSaw.withLock { $0 }.map { [$0] } ?? []
            }),
        PropagationCheck(
            mechanism: "withTaskCancellationHandler handler, task already cancelled at entry",
            captured: "task creation", expected: { $0 },
            observe: { submitter in
                let task = IdentityContext.withThreadIdentity(submitter) {
                    Task { () async -> Identity? in
                        while !Task.isCancelled { await Task.yield() }
                        let handlerSaw = LockedValue<Identity?>(nil)
                        await withTaskCancellationHandler {} onCancel: {
                            let identity = current
                            handlerSaw.withLock { $0 = identity }
                        }
                        return handlerSaw.withLock { $0 }
                    }
                }
                IdentityContext.withThreadIdentity(other) { task.cancel() }
                return [await task.value]
            }),
        PropagationCheck(
            mechanism: "MainActor.run and @MainActor functions (from a task)", captured: "task creation",
            expected: { $0 }, requiresMainQueue: true,
            observe: under { _ in
                let viaRun = await MainActor.run { current }
                let viaFunction = await mainActorIdentity()
                return [viaRun, viaFunction]
            }),
        PropagationCheck(
            mechanism: "effectiveUIIdentity(for:) on the main actor, window UI identity set to another account",
            captured: "task creation", expected: { $0 ?? other }, requiresMainQueue: true,
            observe: under { _ in
                IdentityContext.setUIPolicyIdentity(other, for: tableWindow)
                return [await MainActor.run { IdentityContext.effectiveUIIdentity(for: tableWindow) }]
            }),
    ]

    static func interleaved(on actor: some ObservingActor, submitter: Identity?) async -> [Identity?] {
        async let first = IdentityContext.withThreadIdentity(submitter) { await actor.observeAcrossSuspension() }
        async let second = IdentityContext.withThreadIdentity(other) { await actor.observeAcrossSuspension() }
        let (mine, theirs) = await (first, second)
        // The other caller must see its own identity throughout; a slip shows as a mismatching observation.
        let slips = theirs.filter { $0 != other }.map { Identity("<the other caller observed \($0.tableDescription)>") }
        return mine + slips
    }

    // MARK: AsyncStream

    static let streamChecks: [PropagationCheck] = [
        PropagationCheck(
            mechanism: "AsyncStream consumer; yields from a GCD block, an operation and a task of another identity",
            captured: "nothing (the consumer's own)", expected: { $0 },
            observe: under { _ in
                let (stream, continuation) = AsyncStream<Int>.makeStream()
                yieldFromOtherIdentities(3) { continuation.yield($0) }
                var seen: [Identity?] = []
                for await _ in stream {
                    seen.append(current)
                    if seen.count == 3 { break }
                }
                return seen
            }),
        PropagationCheck(
            mechanism: "AsyncThrowingStream consumer; yields from a GCD block, an operation and a task of another identity",
            captured: "nothing (the consumer's own)", expected: { $0 },
            observe: under { _ in
                let (stream, continuation) = AsyncThrowingStream<Int, any Error>.makeStream()
                yieldFromOtherIdentities(3) { continuation.yield($0) }
                var seen: [Identity?] = []
                do {
                    for try await _ in stream {
                        seen.append(current)
                        if seen.count == 3 { break }
                    }
                } catch {
                    seen.append(Identity("<stream failed: \(error)>"))
                }
                return seen
            }),
    ]

    /// Calls `yield` from a wrapped GCD block, an operation and a task, all under ``other``.
    static func yieldFromOtherIdentities(_ count: Int, _ yield: @escaping @Sendable (Int) -> Void) {
        IdentityContext.withThreadIdentity(other) {
            concurrent.async { yield(0) }
            operations.addOperation { yield(1) }
            Task { yield(2) }
        }
    }

    // MARK: IdentityChannel

    static let channelChecks: [PropagationCheck] = [
        PropagationCheck(
            mechanism: "IdentityChannel message.run, consumer of another identity; sends from GCD, operation, task",
            captured: "the send", expected: { $0 },
            observe: { sender in
                let channel = IdentityChannel<Int>(bufferSize: Int.max)
                sendFromEveryProducer(channel, as: sender)
                return await IdentityContext.withThreadIdentity(other) {
                    var seen: [Identity?] = []
                    for await message in channel {
                        seen.append(message.run { _ in current })
                        if seen.count == 3 { break }
                    }
                    return seen
                }
            }),
        PropagationCheck(
            mechanism: "IdentityChannel.forEach, consumer of another identity", captured: "the send",
            expected: { $0 },
            observe: { sender in
                let channel = IdentityChannel<Int>(bufferSize: 1)
                let producer = IdentityContext.withThreadIdentity(sender) {
                    Task {
                        for index in 0..<3 { await channel.send(index) }
                        channel.finish()
                    }
                }
                let seen = LockedValue<[Identity?]>([])
                await IdentityContext.withThreadIdentity(other) {
                    await channel.forEach { _ in
                        let identity = current
                        seen.withLock { $0.append(identity) }
                    }
                }
                await producer.value
                return seen.withLock { $0 }
            }),
        PropagationCheck(
            mechanism: "IdentityChannel for-await body outside message.run", captured: "nothing (the consumer's own)",
            expected: { $0 },
            observe: under { _ in
                let channel = IdentityChannel<Int>(bufferSize: Int.max, handling: .anyIdentity)
                sendFromEveryProducer(channel, as: other)
                var seen: [Identity?] = []
                for await _ in channel {
                    seen.append(current)
                    if seen.count == 3 { break }
                }
                return seen
            }),
    ]

    /// Sends three elements under `identity`: `trySend` from a GCD block and an operation, `send` from a task.
    static func sendFromEveryProducer(_ channel: IdentityChannel<Int>, as identity: Identity?) {
        IdentityContext.withThreadIdentity(identity) {
            concurrent.async { channel.trySend(0) }
            operations.addOperation { channel.trySend(1) }
            Task { await channel.send(2) }
        }
    }

    // MARK: Foundation

    static let foundationChecks: [PropagationCheck] = [
        .notCarried("Thread.detachNewThread") { report in
            Thread.detachNewThread { report(current) }
        },
        PropagationCheck(
            mechanism: "Timer on a thread's run loop (scheduled in a scope, fired outside it)", captured: "nothing",
            expected: { _ in nil },
            observe: { scheduler in
                await collectReports(1) { report in
                    onRunLoopThread { fire in
                        IdentityContext.withThreadIdentity(scheduler) {
                            fire { report(current) }
                        }
                    }
                }
            }),
        PropagationCheck(
            mechanism: "Timer on a thread's run loop, block run through an IdentitySnapshot", captured: "capture",
            expected: { $0 },
            observe: { scheduler in
                await collectReports(1) { report in
                    onRunLoopThread { fire in
                        IdentityContext.withThreadIdentity(scheduler) {
                            let snapshot = IdentitySnapshot.capture()
                            fire { snapshot.run { report(current) } }
                        }
                    }
                }
            }),
        PropagationCheck(
            mechanism: "NotificationCenter observer on an IdentityOperationQueue (registered by another identity)",
            captured: "the post", expected: { $0 },
            observe: { poster in
                await notificationObservation(poster: poster, queue: IdentityOperationQueue())
            }),
        PropagationCheck(
            mechanism: "NotificationCenter observer with queue nil (runs in the poster)", captured: "nothing (the poster's own)",
            expected: { $0 },
            observe: { poster in
                await notificationObservation(poster: poster, queue: nil)
            }),
    ]

    /// Starts a thread that schedules, through `schedule`, one timer on its own run loop and runs the loop
    /// (outside every scope) until the timer has fired.
    static func onRunLoopThread(
        _ schedule: @escaping @Sendable (_ fire: (@escaping @Sendable () -> Void) -> Void) -> Void
    ) {
        Thread {
            let fired = LockedValue(false)
            schedule { body in
                let timer = Timer(timeInterval: 0.001, repeats: false) { _ in
                    body()
                    fired.withLock { $0 = true }
                }
                RunLoop.current.add(timer, forMode: .default)
            }
            while !fired.withLock({ $0 }) {
                _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05))
            }
        }.start()
    }

    static func notificationObservation(poster: Identity?, queue: OperationQueue?) async -> [Identity?] {
        let center = NotificationCenter()
        let name = Notification.Name("propagation.table.notification")
        let seen = LockedValue<[Identity?]>([])
        let token = IdentityContext.withThreadIdentity(other) {
            center.addObserver(forName: name, object: nil, queue: queue) { _ in
                let identity = current
                seen.withLock { $0.append(identity) }
            }
        }
        _ = await collectReports(1) { (done: @escaping @Sendable (Bool) -> Void) in
            Thread {
                IdentityContext.withThreadIdentity(poster) { center.post(name: name, object: nil) }
                queue?.waitUntilAllOperationsAreFinished()
                done(true)
            }.start()
        }
        center.removeObserver(token)
        return seen.withLock { $0 }
    }
}

/// An actor that records the identity it observes on either side of a suspension.
protocol ObservingActor: Actor {
    func observeAcrossSuspension() async -> [Identity?]
}

extension ObservingActor {
    func observeAcrossSuspension() async -> [Identity?] {
        let before = IdentityContext.currentThreadIdentity
        await Task.yield()
        let middle = IdentityContext.currentThreadIdentity
        await Task.yield()
        return [before, middle, IdentityContext.currentThreadIdentity]
    }
}

actor DefaultExecutorActor: ObservingActor {}

/// An actor on ``IdentityQueueExecutor``.
actor QueueExecutorActor: ObservingActor {
    let executor: IdentityQueueExecutor
    init(executor: IdentityQueueExecutor) { self.executor = executor }
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
}

/// An actor on a custom executor over a raw `DispatchQueue`.
actor RawExecutorActor: ObservingActor {
    let executor: RawQueueExecutor
    init(executor: RawQueueExecutor) { self.executor = executor }
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
}

/// A `SerialExecutor` and `TaskExecutor` over a raw serial `DispatchQueue`, as applications write them.
final class RawQueueExecutor: SerialExecutor, TaskExecutor, Sendable {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async {
            job.runSynchronously(isolatedTo: self.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
    func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }
}

@MainActor
func mainActorIdentity() -> Identity? {
    IdentityContext.currentThreadIdentity
}
