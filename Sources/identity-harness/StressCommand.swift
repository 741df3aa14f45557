import Dispatch
import Foundation
import IdentityRuntime
import IdentityTesting
import IsolationStress
import Synchronization

/// `identity-harness stress` and `soak`: random programs that hand work from mechanism to mechanism, every
/// unit checking the identity it observes against the one the program says it must see.
///
/// A program is a chain of `depth` hops; each hop is a mechanism (queue async/sync/asyncAfter/barrier,
/// group notify, work item, operation with a dependency, cancelled operation, Task, task group, actor hop,
/// detached task with a snapshot, an actor on ``IdentityQueueExecutor``, `Task.immediate`, an
/// ``IdentityChannel`` element handled by a consumer of another identity) plus, sometimes, an identity change inside the unit (scoped or unscoped)
/// or a thrown error. Chains are generated from the seed alone, so the same seed gives the same programs.
/// Raw probe blocks on the same queues check that no identity is left on worker threads.
enum StressCommand {
    struct Options: Sendable {
        var seed: UInt64 = 1
        var duration: Double = 10
        var identities = 64
        var depth = 12
        var inFlight = 64
        var memory = false
        var fault = FaultInjection.none
        /// `stress --isolation` only: operations in all instead of a duration, and a gate removed on purpose.
        var operations: Int?
        var isolationFault = IsolationStress.Fault.none
        /// `stress --isolation` only: the fault classes injected (`--faults`).
        var isolationFaults: Set<IsolationStress.FaultClass> = []
    }

    enum Mechanism: String, CaseIterable {
        case async, sync, asyncAfter, barrier, groupNotify, workItem, operation, identityOperation
        case cancelledOperation, task, taskGroup, actorHop, detachedSnapshot
        case executorActor, taskImmediate, channel, globalAsync
    }

    enum Twist: CaseIterable {
        case none, scopedOverride, unscopedOverride, thrownError
    }

    /// The options `arguments` give over `defaults`; every value is checked (see ``HarnessFlags``).
    static func parse(_ arguments: ArraySlice<String>, defaults: Options) throws(UsageError) -> Options {
        var options = defaults
        var flags = HarnessFlags(arguments, command: "stress")
        while let flag = try flags.next() {
            switch flag {
            case "--seed": options.seed = try flags.value(of: flag, as: UInt64.self, expected: "a whole number ≥ 0")
            case "--duration":
                options.duration = try flags.value(of: flag, as: Double.self, expected: "seconds > 0") { $0 > 0 && $0.isFinite }
            case "--identities": options.identities = try flags.value(of: flag, as: Int.self, expected: "a whole number ≥ 1") { $0 >= 1 }
            case "--depth": options.depth = try flags.value(of: flag, as: Int.self, expected: "a whole number ≥ 1") { $0 >= 1 }
            case "--in-flight": options.inFlight = try flags.value(of: flag, as: Int.self, expected: "a whole number ≥ 1") { $0 >= 1 }
            case "--fault":
                let faults = ["none": FaultInjection.none, "skip-restore": .skipRestore, "capture-at-run": .captureAtRun]
                let name = try flags.value(of: flag)
                guard let fault = faults[name] else {
                    throw UsageError(description: "stress: --fault takes none, skip-restore or capture-at-run, got '\(name)'")
                }
                options.fault = fault
            case "--operations":
                options.operations = try flags.value(of: flag, as: Int.self, expected: "a whole number ≥ 1") { $0 >= 1 }
            case "--isolation-fault":
                let name = try flags.value(of: flag)
                guard let fault = IsolationStress.Fault(rawValue: name) else {
                    let names = IsolationStress.Fault.allCases.map(\.rawValue).joined(separator: ", ")
                    throw UsageError(description: "stress: --isolation-fault takes one of \(names), got '\(name)'")
                }
                options.isolationFault = fault
            case "--faults":
                let list = try flags.value(of: flag)
                guard let faults = IsolationStress.FaultClass.parse(list) else {
                    let names = IsolationStress.FaultClass.allCases.map(\.rawValue).joined(separator: ", ")
                    throw UsageError(description: "stress: --faults takes a comma-separated list of \(names), all or none, got '\(list)'")
                }
                options.isolationFaults = faults
            default:
                throw flags.unknown(flag)
            }
        }
        return options
    }

    /// Runs until the duration has passed; returns whether there were no violations.
    static func run(_ options: Options) -> Bool {
        FaultInjection.processWide = options.fault
        let world = World(options: options)
        print("stress: seed \(options.seed), \(options.identities) identities, depth \(options.depth), "
              + "\(options.inFlight) chains in flight, \(Int(options.duration)) s"
              + (options.fault == .none ? "" : ", injected fault \(options.fault)"))
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(options.duration * 1e9)
        let baselineMemory = residentBytes()
        var lastReport = start
        for _ in 0..<options.inFlight { world.startChain(deadline: deadline) }
        while world.chainsInFlight.load(ordering: .acquiring) > 0 {
            Thread.sleep(forTimeInterval: 0.05)
            let now = DispatchTime.now().uptimeNanoseconds
            if now - lastReport >= 1_000_000_000 {
                lastReport = now
                let units = world.totalUnits
                let seconds = Double(now - start) / 1e9
                var line = String(format: "  %5.1f s  %10d units  %9.0f units/s  %d violations",
                                  seconds, units, Double(units) / seconds, world.totalViolations)
                if options.memory {
                    line += String(format: "  rss %.1f MiB", Double(residentBytes()) / 1_048_576)
                }
                print(line)
            }
        }
        world.probeAllQueues()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        FaultInjection.processWide = .none
        return world.report(elapsed: elapsed, memoryGrowth: options.memory ? residentBytes() - baselineMemory : nil)
    }

    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Counters per mechanism and the queues every program shares.
final class World: Sendable {
    typealias Mechanism = StressCommand.Mechanism

    let options: StressCommand.Options
    let identities: [Identity?]
    let serial = IdentityDispatchQueue(label: "stress.serial")
    let concurrent = IdentityDispatchQueue(label: "stress.concurrent", attributes: .concurrent)
    /// `sync` hops get a concurrent queue that never runs barriers: nested `sync` on it cannot deadlock.
    let syncTarget = IdentityDispatchQueue(label: "stress.sync", attributes: .concurrent)
    /// The global queues of every class: their `async` is the block-free path, which no other mechanism takes.
    let globals: [IdentityDispatchQueue] = [
        .background, .utility, .default, .userInitiated, .userInteractive, .unspecified,
    ].map { IdentityDispatchQueue.global(qos: $0) }
    private let nextGlobal = Atomic<Int>(0)
    let operations: IdentityOperationQueue
    /// Units handed through a channel to one consumer task running under an identity of its own.
    let channel = IdentityChannel<@Sendable () -> Void>(bufferSize: Int.max)
    let executorActor = ExecutorHopTarget(executor: IdentityQueueExecutor(label: "stress.executor"))
    let chainsInFlight = Atomic<Int>(0)
    private let nextChain = Atomic<UInt64>(0)
    private let units: [Counter]
    private let misattributions: [Counter]
    private let leaks = Atomic<Int>(0)
    private let probes = Atomic<Int>(0)

    init(options: StressCommand.Options) {
        self.options = options
        var identities: [Identity?] = [nil, .unmanaged]
        identities += (0..<options.identities).map { Identity("stress\($0)@tenant\($0 % 7).example") }
        self.identities = identities
        let operations = IdentityOperationQueue()
        operations.maxConcurrentOperationCount = 8
        self.operations = operations
        units = Mechanism.allCases.map { _ in Counter() }
        misattributions = Mechanism.allCases.map { _ in Counter() }
        let channel = channel
        Task {
            await IdentityContext.withThreadIdentity("stress-consumer@channel.example") {
                await channel.forEach { unit in unit() }
            }
        }
    }

    var totalUnits: Int { units.reduce(0) { $0 + $1.value } }
    var totalViolations: Int {
        misattributions.reduce(0) { $0 + $1.value } + leaks.load(ordering: .relaxed)
            + CancelledOperation.ranAnyway.value
    }

    /// Starts the next chain of the seed's sequence unless the deadline has passed.
    func startChain(deadline: UInt64) {
        guard DispatchTime.now().uptimeNanoseconds < deadline else { return }
        chainsInFlight.add(1, ordering: .relaxed)
        let index = nextChain.add(1, ordering: .relaxed).oldValue
        var generator = SplitMix64(seed: options.seed &* 0x1_0000_0001 &+ index)
        let identity = identities[Int(generator.next() % UInt64(identities.count))]
        let hops = (0..<options.depth).map { _ in
            Hop(mechanism: Mechanism.allCases[Int(generator.next() % UInt64(Mechanism.allCases.count))],
                twist: StressCommand.Twist.allCases[Int(generator.next() % 8) < 5 ? 0 : Int(generator.next() % 4)],
                other: identities[Int(generator.next() % UInt64(identities.count))])
        }
        IdentityContext.withThreadIdentity(identity) {
            run(hops[...], expected: identity) { [self] in
                chainsInFlight.subtract(1, ordering: .releasing)
                startChain(deadline: deadline)
            }
        }
    }

    struct Hop: Sendable {
        let mechanism: Mechanism
        let twist: StressCommand.Twist
        let other: Identity?
    }

    /// Runs the first hop of `hops` from the current context, which must have `expected` as its identity.
    func run(_ hops: ArraySlice<Hop>, expected: Identity?, done: @escaping @Sendable () -> Void) {
        guard let hop = hops.first else { return done() }
        let rest = hops.dropFirst()
        let index = Mechanism.allCases.firstIndex(of: hop.mechanism)!
        /// The unit's body: check, then apply the twist and go on with the rest of the chain.
        let unit: @Sendable () -> Void = { [self] in
            check(expected, index)
            switch hop.twist {
            case .none:
                run(rest, expected: expected, done: done)
            case .scopedOverride:
                IdentityContext.withThreadIdentity(hop.other) { run(rest, expected: hop.other, done: done) }
                check(expected, index)
            case .unscopedOverride:
                if IdentityContext.isInsideTask {
                    run(rest, expected: expected, done: done)
                } else {
                    IdentityContext.setCurrentThreadIdentity(hop.other)
                    run(rest, expected: hop.other, done: done)
                }
            case .thrownError:
                do {
                    try IdentityContext.withThreadIdentity(hop.other) {
                        run(rest, expected: hop.other, done: done)
                        throw CancellationError()
                    }
                } catch {
                    check(expected, index)
                }
            }
        }
        switch hop.mechanism {
        case .async:
            concurrent.async(execute: unit)
        case .sync:
            serialProbeIfDue()
            syncTarget.sync { unit() }
        case .asyncAfter:
            serial.asyncAfter(deadline: .now() + .microseconds(50), execute: unit)
        case .barrier:
            concurrent.async(flags: .barrier, execute: unit)
        case .groupNotify:
            let group = DispatchGroup()
            IdentityContext.withThreadIdentity(hop.other) { concurrent.async(group: group) {} }
            group.notify(queue: serial, execute: unit)
        case .workItem:
            let item = IdentityWorkItem(block: unit)
            IdentityContext.withThreadIdentity(hop.other) { serial.async(execute: item) }
        case .operation:
            let first = BlockOperation {}
            let second = BlockOperation(block: unit)
            second.addDependency(first)
            operations.addOperations([second, first], waitUntilFinished: false)
        case .identityOperation:
            // Created under another identity: the enqueue, not the creation, decides.
            let operation = IdentityContext.withThreadIdentity(hop.other) { UnitOperation(unit) }
            let first = BlockOperation {}
            operation.addDependency(first)
            operations.addOperations([operation, first], waitUntilFinished: false)
        case .cancelledOperation:
            let cancelled = CancelledOperation()
            let follower = BlockOperation(block: unit)
            follower.addDependency(cancelled)
            cancelled.cancel()
            operations.addOperation(cancelled)
            operations.addOperation(follower)
        case .task:
            Task { unit() }
        case .taskGroup:
            Task {
                await withTaskGroup(of: Void.self) { group in group.addTask { unit() } }
            }
        case .actorHop:
            Task { await HopTarget.shared.perform(unit) }
        case .detachedSnapshot:
            let snapshot = IdentitySnapshot.capture()
            Task.detached { await snapshot.run { () async -> Void in unit() } }
        case .executorActor:
            // A block of another identity on the executor's queue first: it must not reach the job.
            IdentityContext.withThreadIdentity(hop.other) { executorActor.executor.queue.async {} }
            Task { await executorActor.perform(unit) }
        case .taskImmediate:
            if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
                Task.immediate { unit() }
            } else {
                Task { unit() }
            }
        case .channel:
            channel.trySend(unit)
        case .globalAsync:
            globals[nextGlobal.add(1, ordering: .relaxed).oldValue % globals.count].async(execute: unit)
        }
    }

    private func check(_ expected: Identity?, _ index: Int) {
        units[index].increment()
        if IdentityContext.currentThreadIdentity != expected {
            misattributions[index].increment()
        }
    }

    private func serialProbeIfDue() {
        guard probes.add(1, ordering: .relaxed).newValue % 16 == 0 else { return }
        serial.underlying.async { [self] in
            if IdentityContext.currentThreadIdentity != nil { leaks.add(1, ordering: .relaxed) }
        }
        concurrent.underlying.async { [self] in
            if IdentityContext.currentThreadIdentity != nil { leaks.add(1, ordering: .relaxed) }
        }
    }

    /// Raw blocks across every worker at the end.
    func probeAllQueues() {
        let found = IdentityLeakProbe.leftoverIdentitiesOnWorkers(probes: 512)
        leaks.add(found.count, ordering: .relaxed)
        serial.underlying.sync {
            if IdentityContext.currentThreadIdentity != nil { leaks.add(1, ordering: .relaxed) }
        }
        executorActor.executor.queue.underlying.sync {
            if IdentityContext.currentThreadIdentity != nil { leaks.add(1, ordering: .relaxed) }
        }
    }

    /// Prints the table per mechanism; returns whether there were no violations.
    func report(elapsed: Double, memoryGrowth: Int?) -> Bool {
        print("mechanism            units        misattributed  units/s")
        for (index, mechanism) in Mechanism.allCases.enumerated() {
            let count = units[index].value
            print(mechanism.rawValue.padding(toLength: 20, withPad: " ", startingAt: 0)
                  + String(format: " %-12d %-14d %.0f", count, misattributions[index].value,
                           Double(count) / elapsed))
        }
        let total = totalUnits
        let misattributed = misattributions.reduce(0) { $0 + $1.value }
        print(String(format: "total                %-12d %-14d %.0f", total, misattributed, Double(total) / elapsed))
        print("cancelled operations that ran anyway: \(CancelledOperation.ranAnyway.value)")
        print("leaked identities on workers: \(leaks.load(ordering: .relaxed)) (from \(probes.load(ordering: .relaxed) / 16 * 2 + 513) raw probes)")
        if let memoryGrowth {
            let perMillion = total > 0 ? Double(memoryGrowth) / Double(total) * 1_000_000 : 0
            print(String(format: "resident memory growth: %.1f MiB in all, %.2f MiB per million units",
                         Double(memoryGrowth) / 1_048_576, perMillion / 1_048_576))
        }
        let violations = totalViolations
        print(violations == 0 ? "0 violations" : "\(violations) VIOLATIONS")
        return violations == 0
    }
}

/// One relaxed atomic counter.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)
    var value: Int { storage.load(ordering: .relaxed) }
    func increment() { storage.add(1, ordering: .relaxed) }
}

/// An operation that is cancelled before it starts, so its `main()` must never run.
final class CancelledOperation: Operation, @unchecked Sendable {
    /// How many cancelled operations ran anyway (a violation).
    static let ranAnyway = Counter()

    override func main() {
        Self.ranAnyway.increment()
    }
}

/// An `IdentityOperation` subclass that runs one unit (the queue schedules it without a carrier).
final class UnitOperation: IdentityOperation, @unchecked Sendable {
    private let unit: @Sendable () -> Void

    init(_ unit: @escaping @Sendable () -> Void) {
        self.unit = unit
    }

    override func main() {
        unit()
    }
}

/// An actor on ``IdentityQueueExecutor``: its jobs run on a wrapped queue shared with plain blocks.
actor ExecutorHopTarget {
    let executor: IdentityQueueExecutor
    init(executor: IdentityQueueExecutor) { self.executor = executor }
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    func perform(_ work: @Sendable () -> Void) { work() }
}

/// The actor hop of the stress programs.
actor HopTarget {
    static let shared = HopTarget()
    func perform(_ work: @Sendable () -> Void) { work() }
}
