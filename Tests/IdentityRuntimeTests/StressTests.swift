import Dispatch
import Foundation
import IdentityTesting
import Synchronization
import Testing
@testable import IdentityRuntime

/// Many submitter threads, many identities, every queue kind: no unit may observe another identity than
/// the one it was submitted with, and no worker may be left with an identity.
///
/// ## How the stress tests share the machine with the rest of the suite
/// Every other test runs in the same process, on the same dispatch worker pool, in parallel with this suite.
/// A test must never wait behind this suite's flood of work, whatever the machine's speed or load, so:
/// - **Bounded in flight.** A configuration keeps at most ``window`` units submitted and not yet run. The
///   submitter threads (raw threads, not pool threads) block on a semaphore until a unit finishes, so the
///   pool's queues never hold more than a window of stress units and other tests' work is scheduled between
///   them. Every unit still goes through the wrapper's real submission path.
/// - **One configuration at a time** (`.serialized`): at most 16 submitter threads and one window exist at once.
/// - **Sized for the build.** `IDENTITY_STRESS_UNITS` units in all over the 15 configurations; by default
///   1,050,000 in a plain build and 105,000 under ThreadSanitizer, which runs this code 5 to 15 times
///   slower. `IDENTITY_LONG_TESTS=1` multiplies either by ten for soak runs. The release
///   `identity-harness stress` step in `.ci/run` floods the pool for a fixed time instead and reports its count.
/// - **Time limits detect hangs**, they are not speed claims: 10 minutes a configuration.
///
/// What is proven is the same in every size: every unit ran, zero misattributed observations, zero
/// identities left on a worker (probes between units and a sweep of the pool afterwards).
@Suite("Stress: 1/2/4/8/16 submitters × serial/concurrent/operation queues, 16 identities", .serialized)
struct StressTests {
    enum QueueKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case serial, concurrent, operation
        var testDescription: String { rawValue }
    }

    static let identities = Accounts.many(16)
    static let submitterCounts = [1, 2, 4, 8, 16]

    static var totalUnits: Int {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["IDENTITY_STRESS_UNITS"].flatMap(Int.init)
            ?? (Sanitizers.isThreadSanitizerActive ? 105_000 : 1_050_000)
        return environment["IDENTITY_LONG_TESTS"] == "1" ? base * 10 : base
    }

    static var unitsPerConfiguration: Int {
        totalUnits / (submitterCounts.count * QueueKind.allCases.count)
    }

    /// The most units of one configuration submitted and not yet finished.
    static let window = 256

    final class Counters: Sendable {
        let ran = Atomic<Int>(0)
        let misattributed = Atomic<Int>(0)
        let leaked = Atomic<Int>(0)
        let probes = Atomic<Int>(0)
    }

    @Test("zero misattributed observations, zero leaked identities", .timeLimit(.minutes(10)),
          arguments: submitterCounts, QueueKind.allCases)
    func stress(submitters: Int, kind: QueueKind) async {
        let counters = Counters()
        let units = Self.unitsPerConfiguration
        let perSubmitter = units / submitters
        let group = DispatchGroup()
        let slots = DispatchSemaphore(value: Self.window)
        let dispatchQueue: IdentityDispatchQueue = switch kind {
        case .serial: IdentityDispatchQueue(label: "stress.serial")
        case .concurrent: IdentityDispatchQueue(label: "stress.concurrent", attributes: .concurrent)
        case .operation: IdentityDispatchQueue(label: "stress.unused")
        }
        let operationQueue = IdentityOperationQueue()
        operationQueue.maxConcurrentOperationCount = 4

        /// Submits one unit that checks it observes `expected`.
        /// Waits for a free slot in the window first (on the submitter's raw thread).
        @Sendable func submit(expecting expected: Identity?, flow: IdentityFlow) {
            slots.wait()
            group.enter()
            let unit: @Sendable () -> Void = {
                if IdentityContext.currentThreadIdentity != expected {
                    counters.misattributed.add(1, ordering: .relaxed)
                }
                counters.ran.add(1, ordering: .relaxed)
                slots.signal()
                group.leave()
            }
            switch kind {
            case .serial, .concurrent: dispatchQueue.async(flow: flow, execute: unit)
            case .operation: operationQueue.addOperation(flow: flow, unit)
            }
        }

        /// A raw block on the same workers: it must find no identity left behind.
        @Sendable func probe() {
            slots.wait()
            group.enter()
            let check: @Sendable () -> Void = {
                if IdentityContext.currentThreadIdentity != nil {
                    counters.leaked.add(1, ordering: .relaxed)
                }
                counters.probes.add(1, ordering: .relaxed)
                slots.signal()
                group.leave()
            }
            switch kind {
            case .serial, .concurrent: dispatchQueue.underlying.async(execute: check)
            case .operation: OperationQueue.plainProbeQueue.addOperation(check)
            }
        }

        let threads = (0..<submitters).map { submitter in
            // Held until the thread has submitted everything, so the group cannot drain early.
            group.enter()
            return Thread {
                defer { group.leave() }
                for index in 0..<perSubmitter {
                    let identity = Self.identities[(submitter &* 7 &+ index) % Self.identities.count]
                    switch index % 16 {
                    case 0:
                        IdentityContext.withThreadIdentity(identity) { submit(expecting: nil, flow: .suppress) }
                    case 1:
                        let assigned = Self.identities[(index / 16) % Self.identities.count]
                        submit(expecting: assigned, flow: .assign(assigned))
                    case 2:
                        probe()
                        IdentityContext.withThreadIdentity(nil) { submit(expecting: nil, flow: .inherit) }
                    default:
                        IdentityContext.withThreadIdentity(identity) { submit(expecting: identity, flow: .inherit) }
                    }
                }
            }
        }
        for thread in threads { thread.start() }
        await withCheckedContinuation { continuation in
            group.notify(queue: .global()) { continuation.resume() }
        }

        #expect(counters.ran.load(ordering: .relaxed) == perSubmitter * submitters)
        #expect(counters.misattributed.load(ordering: .relaxed) == 0)
        #expect(counters.leaked.load(ordering: .relaxed) == 0)
        #expect(counters.probes.load(ordering: .relaxed) > 0)
        #expect(Self.sweepWorkersForLeftoverIdentities() == 0)
    }

    /// Runs raw blocks across the global pool's workers; counts those that find an identity.
    static func sweepWorkersForLeftoverIdentities() -> Int {
        let leftovers = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 256) { _ in
            if IdentityContext.currentThreadIdentity != nil { leftovers.add(1, ordering: .relaxed) }
        }
        return leftovers.load(ordering: .relaxed)
    }
}

extension OperationQueue {
    /// A plain queue whose raw operations probe the shared worker pool for leftover identities.
    static let plainProbeQueue = OperationQueue()
}
