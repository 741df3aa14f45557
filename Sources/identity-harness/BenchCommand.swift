import Dispatch
import Foundation
import IdentityCrypto
import IdentityPolicy
import IdentityRuntime
import Synchronization

/// `identity-harness bench`: the headline pairs, each measured three ways in one process:
/// - **raw**: the primitive alone (`DispatchQueue`, `OperationQueue`, `Task {}`, a bare `TaskLocal` read);
/// - **peer**: what a user writes instead of adopting the runtime: capture a `@TaskLocal` at submission and
///   rebind it with `withValue` inside the block (no hygiene, no overrides, no strict mode);
/// - **ours**: the identity-carrying wrapper.
///
/// The `ui-switch-…` pairs compare `PolicyManager.setUIPolicyIdentity` of an unmanaged account with the bare
/// completion hop it is built on (the completion handler dispatched with `async` to the completion queue);
/// the peer sets a mutex-guarded window table and then makes the same hop. `ui-switch-unmanaged` sets the
/// account the window shows already (what an app does each time a view appears); `…-change` alternates
/// between two unmanaged accounts, so every call changes the window: on an isolated manager whose
/// notification center nobody holds, and on `PolicyManager.shared`, which posts `.uiIdentityDidChange` to
/// `NotificationCenter.default` each time. `ui-switch-unmanaged-async` is the `async` twin, awaited, against
/// awaiting a continuation resumed from a global-queue block (wall clock only: its thread hops make
/// instruction counts vary).
///
/// Two modes:
/// - the table (default): every pair, the three members interleaved (raw, peer, ours, raw, ...) over
///   several rounds, printed as median ns per operation and the median ratios ours/raw and ours/peer.
///   Run it in release mode: `swift run -c release identity-harness bench`. `--only NAME` prints one pair;
///   `--cpu-time` measures the calling thread's CPU time instead of wall clock (meaningful only for pairs that
///   run on the calling thread, such as `assertion-verify` and `assertion-sign`), so that a loaded machine does not count.
/// - one member (`--pair NAME --side raw|peer|ours --count N`): runs a warm-up of 1,000 operations, then
///   `N` operations of that member, and nothing else, for `scripts/callgrind-pairs.sh` to count
///   instructions (a run with `--count 0` is the baseline it subtracts).
///
/// `--backend` prints the process's Ed25519 verification backend (`libsodium` or `libcrypto` on Linux:
/// `IDENTITY_SODIUM=off` forces libcrypto) and nothing else; the table prints it above its rows.
enum BenchCommand {
    enum Side: String, CaseIterable {
        case raw, peer, ours
    }

    struct Pair {
        /// The name `--pair` takes.
        let name: String
        let title: String
        /// The most ours/raw may be (from issue 15's targets), or nil where only an absolute figure is
        /// targeted.
        let targetRatio: Double?
        let operations: Int
        let raw: (Int) -> Void
        let peer: (Int) -> Void
        let ours: (Int) -> Void

        func body(_ side: Side) -> (Int) -> Void {
            switch side {
            case .raw: raw
            case .peer: peer
            case .ours: ours
            }
        }
    }

    struct Options {
        var rounds = 9
        var scale = 1.0
        var pair: String?
        /// Prints the table for this pair only.
        var only: String?
        /// Measures the calling thread's CPU time instead of wall clock: for pairs whose members run on the
        /// calling thread only (`assertion-verify`, `assertion-sign`, the reads), so that a loaded machine does not count.
        var cpuTime = false
        var side = Side.ours
        var count = 20_000
    }

    static func run(arguments: ArraySlice<String>) throws(UsageError) -> Bool {
        var options = Options()
        var flags = HarnessFlags(arguments, command: "bench")
        while let flag = try flags.next() {
            switch flag {
            case "--rounds": options.rounds = try flags.value(of: flag, as: Int.self, expected: "a whole number ≥ 1") { $0 >= 1 }
            case "--scale": options.scale = try flags.value(of: flag, as: Double.self, expected: "a number > 0") { $0 > 0 && $0.isFinite }
            case "--pair": options.pair = try flags.value(of: flag)
            case "--only": options.only = try flags.value(of: flag)
            case "--cpu-time": options.cpuTime = true
            case "--count": options.count = try flags.value(of: flag, as: Int.self, expected: "a whole number ≥ 0") { $0 >= 0 }
            case "--side":
                let name = try flags.value(of: flag)
                guard let side = Side(rawValue: name) else {
                    throw UsageError(description: "bench: --side takes raw, peer or ours, got '\(name)'")
                }
                options.side = side
            case "--list":
                for pair in makePairs(scale: 1) { print(pair.name) }
                return true
            case "--backend":
                // For scripts/callgrind-pairs.sh, whose limits for the Ed25519 verification pairs are per backend.
                print(Ed25519.verificationBackend)
                return true
            default:
                throw flags.unknown(flag)
            }
        }
        let pairs = makePairs(scale: options.scale)
        if let name = options.pair {
            guard let pair = pairs.first(where: { $0.name == name }) else {
                let names = pairs.map(\.name).joined(separator: ", ")
                FileHandle.standardError.write(Data("bench: unknown pair \(name); pairs: \(names)\n".utf8))
                return false
            }
            let body = pair.body(options.side)
            body(1_000)
            body(options.count)
            return true
        }
        #if DEBUG
        print("note: debug build; run `swift run -c release identity-harness bench` for meaningful figures")
        #endif
        let shown = options.only.map { name in pairs.filter { $0.name == name } } ?? pairs
        guard !shown.isEmpty else {
            FileHandle.standardError.write(Data("bench: unknown pair \(options.only ?? "")\n".utf8))
            return false
        }
        // The Ed25519 backend decides the assertion pairs' figures: say which one ran.
        print("Ed25519 verification: \(Ed25519.verificationBackendDescription)")
        printTable(shown, rounds: options.rounds, cpuTime: options.cpuTime)
        return true
    }

    static func printTable(_ pairs: [Pair], rounds: Int, cpuTime: Bool = false) {
        let unit = cpuTime ? "CPU ns/op" : "ns/op"
        print("| pair | raw \(unit) | peer \(unit) | ours \(unit) | ours/raw (min–max) | ours/peer | target ours/raw |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for pair in pairs {
            // Warm up every member once.
            for side in Side.allCases { pair.body(side)(pair.operations / 10) }
            var times: [Side: [Double]] = [:]
            var oursToRaw: [Double] = []
            var oursToPeer: [Double] = []
            for _ in 0..<rounds {
                var round: [Side: Double] = [:]
                for side in Side.allCases {
                    round[side] = nanosecondsPerOperation(pair.operations, cpuTime: cpuTime, pair.body(side))
                    times[side, default: []].append(round[side]!)
                }
                oursToRaw.append(round[.ours]! / round[.raw]!)
                oursToPeer.append(round[.ours]! / round[.peer]!)
            }
            let ratio = median(oursToRaw)
            let target = pair.targetRatio.map { String(format: "≤ %.2fx %@", $0, ratio <= $0 ? "met" : "MISSED") } ?? ""
            print("| \(pair.title) | "
                  + String(format: "%.1f | %.1f | %.1f | %.2fx (%.2f–%.2f) | %.2fx | ",
                           median(times[.raw]!), median(times[.peer]!), median(times[.ours]!),
                           ratio, oursToRaw.min()!, oursToRaw.max()!, median(oursToPeer))
                  + target + " |")
        }
    }

    static func nanosecondsPerOperation(_ operations: Int, cpuTime: Bool = false, _ body: (Int) -> Void) -> Double {
        let now = cpuTime ? threadCPUNanoseconds : { DispatchTime.now().uptimeNanoseconds }
        let start = now()
        body(operations)
        let end = now()
        return Double(end - start) / Double(operations)
    }

    /// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
    static func threadCPUNanoseconds() -> UInt64 {
        var time = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return DispatchTime.now().uptimeNanoseconds }
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[sorted.count / 2]
    }

    /// State touched only on one serial queue (or under its own discipline), for capturing closures.
    final class Counter: @unchecked Sendable {
        var value = 0
    }

    /// The peer's identity: a bare task-local, as a user without the runtime would declare it.
    @TaskLocal static var bareTaskLocal: Identity?

    /// The peer's process-wide fallback for reads: a global behind a mutex.
    static let peerProcessIdentity = Mutex<Identity?>(nil)

    /// What the operations add to, behind a lock (operations may run on any thread).
    final class OperationSink: Sendable {
        let total = Mutex(0)
    }

    /// Runs `operation` to completion from synchronous code.
    static func blocking(_ operation: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await operation()
            done.signal()
        }
        done.wait()
    }

    static func makePairs(scale: Double) -> [Pair] {
        let n = { (base: Int) in max(1_000, Int(Double(base) * scale)) }
        let identity: Identity = "alice@contoso.com"
        let rawSerial = DispatchQueue(label: "bench.raw.serial")
        let wrappedSerial = IdentityDispatchQueue(label: "bench.wrapped.serial")
        let rawConcurrent = DispatchQueue(label: "bench.raw.concurrent", attributes: .concurrent)
        let wrappedConcurrent = IdentityDispatchQueue(label: "bench.wrapped.concurrent", attributes: .concurrent)
        let counter = Counter()

        // Submitted while the queue is suspended, then drained: the submit side and the worker side each run
        // in one stretch, so instruction counts repeat from run to run (no idle/wake-up churn in between).
        func serialAsync(
            _ submit: @escaping (Int, @escaping @Sendable () -> Void) -> Void, drain: @escaping () -> Void
        ) -> (Int) -> Void {
            { count in
                rawSerial.suspend()
                wrappedSerial.underlying.suspend()
                for index in 0..<count { submit(index) { counter.value &+= index } }
                rawSerial.resume()
                wrappedSerial.underlying.resume()
                drain()
            }
        }
        // The peer: capture the task-local at submission, rebind it inside the block.
        let peerSerialAsync = serialAsync({ _, work in
            let captured = bareTaskLocal
            rawSerial.async { $bareTaskLocal.withValue(captured, operation: work) }
        }, drain: { rawSerial.sync {} })
        func concurrentAsync(
            _ submit: @escaping (DispatchGroup, @escaping @Sendable () -> Void) -> Void
        ) -> (Int) -> Void {
            { count in
                let group = DispatchGroup()
                let sink = Counter()
                for _ in 0..<count { submit(group) { _ = sink } }
                group.wait()
            }
        }

        let rawOperations = OperationQueue()
        rawOperations.maxConcurrentOperationCount = 1
        let wrappedOperations = IdentityOperationQueue()
        wrappedOperations.maxConcurrentOperationCount = 1
        let operationSink = OperationSink()
        // Like the serial async pairs: enqueue while suspended, then run them all, so counts repeat.
        func batched(_ queue: OperationQueue, _ enqueue: () -> Void) {
            queue.isSuspended = true
            enqueue()
            queue.isSuspended = false
            queue.waitUntilAllOperationsAreFinished()
        }

        @Sendable func createTasks(_ count: Int) async {
            var tasks: [Task<Int, Never>] = []
            tasks.reserveCapacity(count)
            for index in 0..<count { tasks.append(Task { index }) }
            var total = 0
            for task in tasks { total &+= await task.value }
            counter.value &+= total
        }

        // setUIPolicyIdentity of an unmanaged account: an isolated manager with one managed account (with a
        // policy) and one conditional-launch check, as in an app; the account switched to has no policy.
        // Completions go to a serial queue, suspended while the calls are made and then drained, so the
        // calling side and the completion side each run in one stretch (repeatable instruction counts).
        let switchManager = PolicyManager(policySource: StaticPolicySource([identity: Policy(identity: identity)]))
        switchManager.setPrimaryUser(identity)
        switchManager.registerConditionalLaunchCheck(ClosureConditionalLaunchCheck { _, _ in .passes })
        let unmanaged: Identity = "bob@fabrikam.com"
        let otherUnmanaged: Identity = "carol@fabrikam.com"
        let alternate = Counter()
        let benchWindow: WindowID = "bench.window"
        let completionQueue = DispatchQueue(label: "bench.completion")
        let peerWindows = Mutex<[WindowID: Identity]>([:])
        let completed: @Sendable (SwitchIdentityResult) -> Void = { result in counter.value &+= result.rawValue &+ 1 }
        func completions(_ call: @escaping () -> Void) -> (Int) -> Void {
            { count in
                completionQueue.suspend()
                for _ in 0..<count { call() }
                completionQueue.resume()
                completionQueue.sync {}
            }
        }

        return [
            Pair(name: "async-identity", title: "async, serial, submitter with identity", targetRatio: 1.10,
                 operations: n(200_000),
                 raw: serialAsync({ _, work in rawSerial.async(execute: work) }, drain: { rawSerial.sync {} }),
                 peer: { count in $bareTaskLocal.withValue(identity) { peerSerialAsync(count) } },
                 ours: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         serialAsync({ _, work in wrappedSerial.async(execute: work) }, drain: { wrappedSerial.sync {} })(count)
                     }
                 }),
            Pair(name: "async-no-identity", title: "async, serial, submitter without identity", targetRatio: 1.05,
                 operations: n(200_000),
                 raw: serialAsync({ _, work in rawSerial.async(execute: work) }, drain: { rawSerial.sync {} }),
                 peer: peerSerialAsync,
                 ours: serialAsync({ _, work in wrappedSerial.async(execute: work) }, drain: { wrappedSerial.sync {} })),
            Pair(name: "async-concurrent", title: "async, concurrent, submitter with identity", targetRatio: 1.10,
                 operations: n(100_000),
                 raw: concurrentAsync { group, work in rawConcurrent.async(group: group, execute: work) },
                 peer: { count in
                     $bareTaskLocal.withValue(identity) {
                         concurrentAsync { group, work in
                             let captured = bareTaskLocal
                             rawConcurrent.async(group: group) { $bareTaskLocal.withValue(captured, operation: work) }
                         }(count)
                     }
                 },
                 ours: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         concurrentAsync { group, work in wrappedConcurrent.async(group: group, execute: work) }(count)
                     }
                 }),
            Pair(name: "sync", title: "sync, serial, caller with identity", targetRatio: 1.3, operations: n(300_000),
                 raw: { count in for index in 0..<count { rawSerial.sync { counter.value &+= index } } },
                 peer: { count in
                     $bareTaskLocal.withValue(identity) {
                         for index in 0..<count {
                             let captured = bareTaskLocal
                             rawSerial.sync { $bareTaskLocal.withValue(captured) { counter.value &+= index } }
                         }
                     }
                 },
                 ours: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         for index in 0..<count { wrappedSerial.sync { counter.value &+= index } }
                     }
                 }),
            Pair(name: "operation-subclass", title: "OperationQueue, Operation subclass, identity", targetRatio: 1.10,
                 operations: n(50_000),
                 raw: { count in
                     batched(rawOperations) {
                         for index in 0..<count { rawOperations.addOperation(SumOperation(index, into: operationSink)) }
                     }
                 },
                 peer: { count in
                     batched(rawOperations) {
                         $bareTaskLocal.withValue(identity) {
                             for index in 0..<count {
                                 rawOperations.addOperation(PeerSumOperation(index, into: operationSink))
                             }
                         }
                     }
                 },
                 ours: { count in
                     batched(wrappedOperations) {
                         IdentityContext.withThreadIdentity(identity) {
                             for index in 0..<count {
                                 wrappedOperations.addOperation(IdentitySumOperation(index, into: operationSink))
                             }
                         }
                     }
                 }),
            Pair(name: "operation-block", title: "OperationQueue.addOperation(block), identity", targetRatio: 1.10,
                 operations: n(50_000),
                 raw: { count in
                     for index in 0..<count { rawOperations.addOperation { counter.value &+= index } }
                     rawOperations.waitUntilAllOperationsAreFinished()
                 },
                 peer: { count in
                     $bareTaskLocal.withValue(identity) {
                         for index in 0..<count {
                             let captured = bareTaskLocal
                             rawOperations.addOperation {
                                 $bareTaskLocal.withValue(captured) { counter.value &+= index }
                             }
                         }
                     }
                     rawOperations.waitUntilAllOperationsAreFinished()
                 },
                 ours: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         for index in 0..<count { wrappedOperations.addOperation { counter.value &+= index } }
                     }
                     wrappedOperations.waitUntilAllOperationsAreFinished()
                 }),
            // One element through a stream: produced (unbounded buffer, nobody waiting), then consumed in one
            // stretch, so the producing and consuming sides each run without thread handoffs.
            Pair(name: "channel-element", title: "IdentityChannel element vs AsyncStream element", targetRatio: 1.2,
                 operations: n(200_000),
                 raw: { count in
                     blocking {
                         await IdentityContext.withThreadIdentity(identity) {
                             let (stream, continuation) = AsyncStream<Int>.makeStream()
                             for index in 0..<count { continuation.yield(index) }
                             continuation.finish()
                             var total = 0
                             for await value in stream { total &+= value }
                             counter.value &+= total
                         }
                     }
                 },
                 peer: { count in
                     blocking {
                         await $bareTaskLocal.withValue(identity) {
                             let (stream, continuation) = AsyncStream<(Int, Identity?)>.makeStream()
                             for index in 0..<count { continuation.yield((index, bareTaskLocal)) }
                             continuation.finish()
                             var total = 0
                             for await (value, sender) in stream {
                                 $bareTaskLocal.withValue(sender) { total &+= value }
                             }
                             counter.value &+= total
                         }
                     }
                 },
                 ours: { count in
                     blocking {
                         await IdentityContext.withThreadIdentity(identity) {
                             let channel = IdentityChannel<Int>(bufferSize: Int.max)
                             for index in 0..<count { channel.trySend(index) }
                             channel.finish()
                             var total = 0
                             for await message in channel { message.run { value in total &+= value } }
                             counter.value &+= total
                         }
                     }
                 }),
            Pair(name: "task-in-scope", title: "Task {} created in an identity scope", targetRatio: 1.05,
                 operations: n(50_000),
                 raw: { count in blocking { await createTasks(count) } },
                 peer: { count in blocking { await $bareTaskLocal.withValue(identity) { await createTasks(count) } } },
                 ours: { count in
                     blocking { await IdentityContext.withThreadIdentity(identity) { await createTasks(count) } }
                 }),
            Pair(name: "read-file-identity", title: "effectiveFileIdentity, thread identity set", targetRatio: nil,
                 operations: n(2_000_000),
                 raw: { count in
                     $bareTaskLocal.withValue(identity) {
                         var hits = 0
                         for _ in 0..<count where bareTaskLocal != nil { hits &+= 1 }
                         counter.value &+= hits
                     }
                 },
                 peer: { count in
                     $bareTaskLocal.withValue(identity) {
                         var hits = 0
                         for _ in 0..<count where (bareTaskLocal ?? peerProcessIdentity.withLock { $0 }) != nil {
                             hits &+= 1
                         }
                         counter.value &+= hits
                     }
                 },
                 ours: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         var hits = 0
                         for _ in 0..<count where IdentityContext.effectiveFileIdentity != nil { hits &+= 1 }
                         counter.value &+= hits
                     }
                 }),
            Pair(name: "read-nothing-set", title: "effectiveFileIdentity, nothing set", targetRatio: nil,
                 operations: n(2_000_000),
                 raw: { count in
                     var hits = 0
                     for _ in 0..<count where bareTaskLocal != nil { hits &+= 1 }
                     counter.value &+= hits
                 },
                 peer: { count in
                     var hits = 0
                     for _ in 0..<count where (bareTaskLocal ?? peerProcessIdentity.withLock { $0 }) != nil {
                         hits &+= 1
                     }
                     counter.value &+= hits
                 },
                 ours: { count in
                     var hits = 0
                     for _ in 0..<count where IdentityContext.effectiveFileIdentity != nil { hits &+= 1 }
                     counter.value &+= hits
                 }),
            Pair(name: "ui-switch-unmanaged", title: "setUIPolicyIdentity, unmanaged (raw: completion hop)",
                 targetRatio: 2.0, operations: n(100_000),
                 raw: completions { completionQueue.async { completed(.success) } },
                 peer: completions {
                     peerWindows.withLock { $0[.main] = unmanaged }
                     completionQueue.async { completed(.success) }
                 },
                 ours: completions {
                     switchManager.setUIPolicyIdentity(
                         unmanaged, for: .main, completionQueue: completionQueue, completionHandler: completed)
                 }),
            Pair(name: "ui-switch-unmanaged-async", title: "await setUIPolicyIdentity, unmanaged (raw: await a global-queue hop)",
                 targetRatio: 2.0, operations: n(50_000),
                 raw: { count in
                     blocking {
                         for _ in 0..<count {
                             await withCheckedContinuation { continuation in
                                 DispatchQueue.global().async { continuation.resume() }
                             }
                         }
                     }
                 },
                 peer: { count in
                     blocking {
                         for _ in 0..<count {
                             await withCheckedContinuation { continuation in
                                 peerWindows.withLock { $0[.main] = unmanaged }
                                 DispatchQueue.global().async { continuation.resume() }
                             }
                         }
                     }
                 },
                 ours: { count in
                     blocking {
                         for _ in 0..<count { await switchManager.setUIPolicyIdentity(unmanaged, for: .main) }
                     }
                 }),
            Pair(name: "ui-switch-unmanaged-change", title: "setUIPolicyIdentity, unmanaged, alternating (raw: completion hop)",
                 targetRatio: 2.0, operations: n(100_000),
                 raw: completions { completionQueue.async { completed(.success) } },
                 peer: completions {
                     alternate.value &+= 1
                     let next = alternate.value & 1 == 0 ? unmanaged : otherUnmanaged
                     peerWindows.withLock { $0[benchWindow] = next }
                     completionQueue.async { completed(.success) }
                 },
                 ours: completions {
                     alternate.value &+= 1
                     switchManager.setUIPolicyIdentity(
                         alternate.value & 1 == 0 ? unmanaged : otherUnmanaged, for: benchWindow,
                         completionQueue: completionQueue, completionHandler: completed)
                 }),
            Pair(name: "ui-switch-shared-change",
                 title: "setUIPolicyIdentity, shared manager, unmanaged, alternating (posts; raw: completion hop)",
                 targetRatio: 2.0, operations: n(100_000),
                 raw: completions { completionQueue.async { completed(.success) } },
                 peer: completions {
                     alternate.value &+= 1
                     let next = alternate.value & 1 == 0 ? unmanaged : otherUnmanaged
                     peerWindows.withLock { $0[benchWindow] = next }
                     completionQueue.async { completed(.success) }
                 },
                 ours: completions {
                     alternate.value &+= 1
                     PolicyManager.shared.setUIPolicyIdentity(
                         alternate.value & 1 == 0 ? unmanaged : otherUnmanaged, for: benchWindow,
                         completionQueue: completionQueue, completionHandler: completed)
                 }),
            assertionPair(operations: n(4_000)),
            assertionFreshPair(operations: n(4_000)),
            assertionSignPair(operations: n(4_000)),
            assertionCachedPair(operations: n(100_000)),
            admissionPair(operations: n(20_000)),
            edgeVerifyPair(operations: n(100_000)),
        ] + protectionPairs(operations: n(20_000))
    }
}

/// A minimal synchronous `Operation` subclass, for the raw member.
private final class SumOperation: Operation, @unchecked Sendable {
    private let value: Int
    private let sink: BenchCommand.OperationSink

    init(_ value: Int, into sink: BenchCommand.OperationSink) {
        self.value = value
        self.sink = sink
    }

    override func main() {
        sink.total.withLock { $0 &+= value }
    }
}

/// The peer's operation: captures the task-local when it is created and rebinds it in `main()`.
private final class PeerSumOperation: Operation, @unchecked Sendable {
    private let value: Int
    private let sink: BenchCommand.OperationSink
    private let captured = BenchCommand.bareTaskLocal

    init(_ value: Int, into sink: BenchCommand.OperationSink) {
        self.value = value
        self.sink = sink
    }

    override func main() {
        BenchCommand.$bareTaskLocal.withValue(captured) {
            sink.total.withLock { $0 &+= value }
        }
    }
}

/// The same operation on the runtime's base class, which the wrapper queue runs without a carrier.
private final class IdentitySumOperation: IdentityOperation, @unchecked Sendable {
    private let value: Int
    private let sink: BenchCommand.OperationSink

    init(_ value: Int, into sink: BenchCommand.OperationSink) {
        self.value = value
        self.sink = sink
    }

    override func main() {
        sink.total.withLock { $0 &+= value }
    }
}
