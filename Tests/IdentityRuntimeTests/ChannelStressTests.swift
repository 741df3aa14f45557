import Dispatch
import Foundation
import IdentityTesting
import Synchronization
import Testing
@testable import IdentityRuntime

/// Many producers of different identities feeding one `IdentityChannel`: every element is delivered exactly
/// once and handled under the identity it was sent with, and neither the consumer nor the workers are left
/// with an identity.
///
/// Sized like ``StressTests``: `IDENTITY_STRESS_UNITS` elements in all over the configurations (by default
/// 500,000 in a plain build, 50,000 under ThreadSanitizer; `IDENTITY_LONG_TESTS=1` multiplies by ten).
@Suite("Stress: IdentityChannel, 1/2/4/8/16 producers × async/sync senders, 16 identities", .serialized)
struct ChannelStressTests {
    enum SenderKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// `send` from tasks, bounded buffer (backpressure).
        case asyncSend
        /// `trySend` from wrapped GCD blocks on an unbounded channel.
        case dispatchTrySend
        var testDescription: String { rawValue }
    }

    static let identities: [Identity?] = [nil, .unmanaged] + Accounts.many(14)
    static let producerCounts = [1, 2, 4, 8, 16]

    static var totalElements: Int {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["IDENTITY_STRESS_UNITS"].flatMap(Int.init)
            ?? (Sanitizers.isThreadSanitizerActive ? 50_000 : 500_000)
        return environment["IDENTITY_LONG_TESTS"] == "1" ? base * 10 : base
    }

    final class SendCounters: Sendable {
        let accepted = Atomic<Int>(0)
        let refused = Atomic<Int>(0)
    }

    /// What a producer sends: who sent it, its sequence number, and the identity it was sent under.
    struct Payload: Sendable {
        let producer: Int
        let sequence: Int
        let identityIndex: Int
    }

    @Test("every element once, in each producer's order, under its sender's identity", .timeLimit(.minutes(10)),
          arguments: producerCounts, SenderKind.allCases)
    func stress(producers: Int, kind: SenderKind) async {
        let perProducer = Self.totalElements / (Self.producerCounts.count * SenderKind.allCases.count) / producers
        let channel = IdentityChannel<Payload>(bufferSize: kind == .asyncSend ? 64 : Int.max)
        let queue = IdentityDispatchQueue(label: "channel.stress", attributes: .concurrent)

        let producersDone = Task {
            await withTaskGroup(of: Void.self) { group in
                for producer in 0..<producers {
                    group.addTask {
                        for sequence in 0..<perProducer {
                            let identityIndex = (producer &* 7 &+ sequence) % Self.identities.count
                            let payload = Payload(producer: producer, sequence: sequence, identityIndex: identityIndex)
                            let identity = Self.identities[identityIndex]
                            switch kind {
                            case .asyncSend:
                                await IdentityContext.withThreadIdentity(identity) { _ = await channel.send(payload) }
                            case .dispatchTrySend:
                                // In order per producer: one serial hand-off at a time through the wrapped queue.
                                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                                    IdentityContext.withThreadIdentity(identity) {
                                        queue.async {
                                            let accepted = channel.trySend(payload)
                                            precondition(accepted, "an unbounded channel accepts every element")
                                            continuation.resume()
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            channel.finish()
        }

        var received = 0
        var misattributed = 0
        var outOfOrder = 0
        var consumerDisturbed = 0
        var nextSequence = [Int](repeating: 0, count: producers)
        await IdentityContext.withThreadIdentity(Accounts.carol) {
            for await message in channel {
                let (payload, observed) = message.run { payload in (payload, IdentityContext.currentThreadIdentity) }
                received += 1
                if observed != Self.identities[payload.identityIndex] || message.identity != observed {
                    misattributed += 1
                }
                if payload.sequence != nextSequence[payload.producer] { outOfOrder += 1 }
                nextSequence[payload.producer] = payload.sequence + 1
                if current != Accounts.carol { consumerDisturbed += 1 }
            }
        }
        await producersDone.value

        #expect(received == perProducer * producers)
        #expect(misattributed == 0)
        #expect(outOfOrder == 0)
        #expect(consumerDisturbed == 0)
        #expect(StressTests.sweepWorkersForLeftoverIdentities() == 0)
    }

    @Test("finished while producers send: what send accepted is delivered exactly once, nothing else",
          .timeLimit(.minutes(10)), arguments: producerCounts)
    func finishWhileSending(producers: Int) async {
        let perProducer = max(1, Self.totalElements / 50 / producers)
        let channel = IdentityChannel<Payload>(bufferSize: 8)
        let counters = SendCounters()
        let producing = Task {
            await withTaskGroup(of: Void.self) { group in
                for producer in 0..<producers {
                    group.addTask {
                        for sequence in 0..<perProducer {
                            let identityIndex = (producer + sequence) % Self.identities.count
                            let sent = await IdentityContext.withThreadIdentity(Self.identities[identityIndex]) {
                                await channel.send(Payload(producer: producer, sequence: sequence, identityIndex: identityIndex))
                            }
                            if sent { counters.accepted.add(1, ordering: .relaxed) } else { counters.refused.add(1, ordering: .relaxed) }
                        }
                    }
                }
            }
        }
        var received = 0
        var misattributed = 0
        var seen = Set<[Int]>()
        var duplicates = 0
        for await message in channel {
            received += 1
            let payload = message.run { payload in
                if IdentityContext.currentThreadIdentity != Self.identities[payload.identityIndex] { misattributed += 1 }
                return payload
            }
            if !seen.insert([payload.producer, payload.sequence]).inserted { duplicates += 1 }
            if received == perProducer * producers / 2 { channel.finish() }
            if received == 1 && perProducer * producers == 1 { channel.finish() }
        }
        await producing.value
        #expect(received == counters.accepted.load(ordering: .relaxed))
        #expect(received + counters.refused.load(ordering: .relaxed) == perProducer * producers)
        #expect(misattributed == 0)
        #expect(duplicates == 0)
    }
}
