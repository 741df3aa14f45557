import Dispatch
import Foundation
import IdentityNIO
import IdentityRuntime
import IdentityTesting
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// Many submitter threads and identities across a `MultiThreadedEventLoopGroup`: every task and callback
/// observes the identity it was submitted or registered with, and raw tasks on the loop threads find no
/// identity left behind.
///
/// `IDENTITY_STRESS_UNITS` units in all over the configurations (default 200,000 in a plain build, 20,000
/// under ThreadSanitizer; `IDENTITY_LONG_TESTS=1` multiplies by ten). At most ``window`` units of a
/// configuration are in flight, so the loops never hold a flood of work.
@Suite("IdentityNIO stress: 1/2/4/8/16 submitters × execute/scheduleTask/future callbacks, 16 identities", .serialized)
struct NIOStressTests {
    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case execute, submitAndSchedule, futureCallbacks
        var testDescription: String { rawValue }
    }

    static let group = MultiThreadedEventLoopGroup(numberOfThreads: 4)
    static let identities: [Identity?] = [nil, .unmanaged] + (0..<14).map { Identity("nio\($0)@tenant\($0 % 5).example") }
    static let submitterCounts = [1, 2, 4, 8, 16]
    static let window = 256

    static var totalUnits: Int {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["IDENTITY_STRESS_UNITS"].flatMap(Int.init)
            ?? (Sanitizers.isThreadSanitizerActive ? 20_000 : 200_000)
        return environment["IDENTITY_LONG_TESTS"] == "1" ? base * 10 : base
    }

    final class Counters: Sendable {
        let ran = Atomic<Int>(0)
        let misattributed = Atomic<Int>(0)
        let leaked = Atomic<Int>(0)
        let probes = Atomic<Int>(0)
    }

    @Test("zero misattributed observations, zero identities left on loop threads", .timeLimit(.minutes(10)),
          arguments: submitterCounts, Kind.allCases)
    func stress(submitters: Int, kind: Kind) async {
        let counters = Counters()
        let perSubmitter = Self.totalUnits / (Self.submitterCounts.count * Kind.allCases.count) / submitters
        let slots = DispatchSemaphore(value: Self.window)
        let done = DispatchGroup()

        @Sendable func check(_ expected: Identity?) {
            if IdentityContext.currentThreadIdentity != expected { counters.misattributed.add(1, ordering: .relaxed) }
            counters.ran.add(1, ordering: .relaxed)
        }
        @Sendable func finished() {
            slots.signal()
            done.leave()
        }

        /// One unit under `identity` through the configuration's mechanism.
        @Sendable func submit(_ identity: Identity?, index: Int) {
            slots.wait()
            done.enter()
            let loop = Self.group.next()
            let other = Self.identities[(index &+ 5) % Self.identities.count]
            IdentityContext.withThreadIdentity(identity) {
                switch kind {
                case .execute:
                    loop.execute(flow: .inherit) {
                        check(identity)
                        finished()
                    }
                case .submitAndSchedule:
                    if index % 2 == 0 {
                        loop.submit(flow: .inherit) { check(identity) }.whenComplete { _ in finished() }
                    } else {
                        loop.scheduleTask(in: .microseconds(10), flow: .inherit) { check(identity) }
                            .futureResult.whenComplete { _ in finished() }
                    }
                case .futureCallbacks:
                    let promise = loop.makePromise(of: Int.self)
                    promise.futureResult
                        .map(flow: .inherit) { value in
                            check(identity)
                            return value
                        }
                        .flatMap(flow: .inherit) { value -> EventLoopFuture<Int> in
                            check(identity)
                            return loop.makeSucceededFuture(value)
                        }
                        .whenComplete(flow: .inherit) { _ in
                            check(identity)
                            finished()
                        }
                    // Completed by code of another identity: the callbacks keep their registrar's.
                    loop.execute(flow: .assign(other ?? .unmanaged)) { promise.succeed(index) }
                }
            }
            if index % 32 == 0 { probe(loop) }
        }

        /// A raw task on the same loop: it must find no identity.
        @Sendable func probe(_ loop: any EventLoop) {
            slots.wait()
            done.enter()
            loop.execute {
                if IdentityContext.currentThreadIdentity != nil { counters.leaked.add(1, ordering: .relaxed) }
                counters.probes.add(1, ordering: .relaxed)
                finished()
            }
        }

        let threads = (0..<submitters).map { submitter in
            done.enter()
            return Thread {
                defer { done.leave() }
                for index in 0..<perSubmitter {
                    submit(Self.identities[(submitter &* 7 &+ index) % Self.identities.count], index: index)
                }
            }
        }
        for thread in threads { thread.start() }
        await withCheckedContinuation { continuation in
            done.notify(queue: .global()) { continuation.resume() }
        }

        let callbacksPerUnit = kind == .futureCallbacks ? 3 : 1
        #expect(counters.ran.load(ordering: .relaxed) == perSubmitter * submitters * callbacksPerUnit)
        #expect(counters.misattributed.load(ordering: .relaxed) == 0)
        #expect(counters.leaked.load(ordering: .relaxed) == 0)
        #expect(counters.probes.load(ordering: .relaxed) > 0)
        #expect(await Self.leftoverIdentitiesOnLoops() == 0)
    }

    /// Raw tasks on every loop of the group, after the run: how many found an identity.
    static func leftoverIdentitiesOnLoops() async -> Int {
        var found = 0
        for loop in group.makeIterator() {
            let leftover = try? await loop.submit { IdentityContext.currentThreadIdentity != nil }.get()
            if leftover == true { found += 1 }
        }
        return found
    }
}
