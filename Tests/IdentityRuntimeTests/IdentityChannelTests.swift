import Dispatch
import Foundation
import IdentityTesting
import Synchronization
import Testing
@testable import IdentityRuntime

/// `IdentityChannel`: what each element carries, buffering and backpressure, finish, cancellation, strict mode.
@Suite("IdentityChannel: elements carry their sender's identity; buffering, finish, cancellation, strict mode")
struct IdentityChannelTests {
    @Test("message.run and forEach bind the sender's identity; the consumer's own is back afterwards",
          arguments: Accounts.submitters)
    func bindsSenderIdentity(sender: Identity?) async {
        let channel = IdentityChannel<Int>(bufferSize: 4)
        await IdentityContext.withThreadIdentity(sender) { _ = await channel.send(1) }
        await IdentityContext.withThreadIdentity(Accounts.bob) {
            var iterator = channel.makeAsyncIterator()
            let message = await iterator.next()
            #expect(message?.identity == sender)
            let observed = await message?.run { value async -> Identity? in
                #expect(value == 1)
                let inChild = await Task { current }.value
                #expect(inChild == sender)
                return current
            }
            #expect(observed == sender)
            #expect(current == Accounts.bob)
        }
    }

    @Test("flow: .suppress sends with no identity, .assign(x) with x; trySend captures like send")
    func flows() async {
        let channel = IdentityChannel<Int>(bufferSize: 8)
        IdentityContext.withThreadIdentity(Accounts.alice) {
            #expect(channel.trySend(0, flow: .suppress))
            #expect(channel.trySend(1, flow: .assign(Accounts.carol)))
            #expect(channel.trySend(2))
            #expect(channel.trySend(3, flow: .assign(.unmanaged)))
        }
        channel.finish()
        var seen: [Identity?] = []
        for await message in channel { seen.append(message.run { _ in current }) }
        #expect(seen == [nil, Accounts.carol, Accounts.alice, .unmanaged])
    }

    @Test("rendezvous (bufferSize 0): send returns only once a consumer has taken the element")
    func rendezvous() async {
        let channel = IdentityChannel<Int>()
        #expect(!channel.trySend(0))   // no consumer waiting, no room
        let returned = LockedValue(false)
        let sender = Task {
            let accepted = await channel.send(7)
            returned.withLock { $0 = true }
            return accepted
        }
        while channel.bufferedCount == 0 { await Task.yield() }
        let returnedBeforeTaken = returned.withLock { $0 }
        #expect(!returnedBeforeTaken)
        var iterator = channel.makeAsyncIterator()
        #expect(await iterator.next()?.unattributedValue == 7)
        #expect(await sender.value)
        #expect(channel.bufferedCount == 0)
    }

    @Test("a bounded buffer accepts bufferSize elements without waiting, then trySend refuses")
    func boundedBuffer() async {
        let channel = IdentityChannel<Int>(bufferSize: 3)
        #expect((0..<3).map { channel.trySend($0) } == [true, true, true])
        #expect(!channel.trySend(3))
        #expect(channel.bufferedCount == 3)
        var iterator = channel.makeAsyncIterator()
        #expect(await iterator.next()?.unattributedValue == 0)
        #expect(channel.trySend(4))
        channel.finish()
        var rest: [Int] = []
        while let message = await iterator.next() { rest.append(message.unattributedValue) }
        #expect(rest == [1, 2, 4])
    }

    @Test("finish: later sends are refused, accepted elements are delivered, waiting senders return true")
    func finish() async {
        let channel = IdentityChannel<Int>(bufferSize: 1)
        #expect(await channel.send(1))
        let waiting = Task { await channel.send(2) }
        while channel.bufferedCount < 2 { await Task.yield() }
        channel.finish()
        #expect(await waiting.value)
        #expect(!(await channel.send(3)))
        #expect(!channel.trySend(4))
        channel.finish()
        var values: [Int] = []
        for await message in channel { values.append(message.unattributedValue) }
        #expect(values == [1, 2])
        var iterator = channel.makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }

    @Test("finish wakes every waiting consumer with the end")
    func finishWakesConsumers() async {
        let channel = IdentityChannel<Int>()
        let consumers = (0..<3).map { _ in
            Task { () async -> Int in
                var count = 0
                for await _ in channel { count += 1 }
                return count
            }
        }
        channel.finish()
        for consumer in consumers { #expect(await consumer.value == 0) }
    }

    @Test("a sender cancelled while it waits withdraws its element and returns false")
    func senderCancellation() async {
        let channel = IdentityChannel<Int>()
        let sender = Task { await channel.send(1) }
        while channel.bufferedCount == 0 { await Task.yield() }
        sender.cancel()
        #expect(!(await sender.value))
        #expect(channel.bufferedCount == 0)
        #expect(channel.trySend(2) == false)
        let cancelledBeforeSend = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await channel.send(3)
        }
        #expect(!(await cancelledBeforeSend.value))
        #expect(channel.bufferedCount == 0)
    }

    @Test("a consumer cancelled while it waits gets nil; the channel stays open for another consumer")
    func consumerCancellation() async {
        let channel = IdentityChannel<Int>(bufferSize: 1)
        let consumer = Task { () async -> IdentityMessage<Int>? in
            var iterator = channel.makeAsyncIterator()
            return await iterator.next()
        }
        consumer.cancel()
        #expect(await consumer.value == nil)
        #expect(await channel.send(5))
        var iterator = channel.makeAsyncIterator()
        #expect(await iterator.next()?.unattributedValue == 5)
    }

    @Test("several consumers: every element is delivered to exactly one")
    func severalConsumers() async {
        let channel = IdentityChannel<Int>(bufferSize: 2)
        let count = 2_000
        let results = await withTaskGroup(of: [Int].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var values: [Int] = []
                    for await message in channel { values.append(message.unattributedValue) }
                    return values
                }
            }
            group.addTask {
                for value in 0..<count { await channel.send(value) }
                channel.finish()
                return []
            }
            return await group.reduce(into: [Int]()) { $0 += $1 }
        }
        #expect(results.sorted() == Array(0..<count))
    }

    @Test("strict mode reports an element read under another identity when the channel requires the sender's")
    func strictModeReportsMisattributedHandling() async {
        let expectedLine: UInt = #line + 6
        let (_, issues) = await capturingRuntimeIssues(kinds: ["channelElementMisattributed"]) {
            let strict = IdentityChannel<Int>(bufferSize: 8)
            let relaxed = IdentityChannel<Int>(bufferSize: 8, handling: .anyIdentity)
            await IdentityStrictMode.checking {
                await IdentityContext.withThreadIdentity(Accounts.alice) {
                    _ = await strict.send(1)
                    _ = await strict.send(2)
                    _ = await relaxed.send(3)
                }
            }
            strict.finish()
            relaxed.finish()
            await IdentityContext.withThreadIdentity(Accounts.bob) {
                var iterator = strict.makeAsyncIterator()
                let first = await iterator.next()
                _ = first?.value                          // under bob: reported
                _ = first?.unattributedValue              // not checked
                let second = await iterator.next()
                _ = second?.run { _ in second?.value }   // under alice: fine
                for await message in relaxed { _ = message.value }   // handling .anyIdentity: fine
            }
        }
        let mine = issues.filter { $0.site?.fileID.description == "IdentityRuntimeTests/IdentityChannelTests.swift" }
        #expect(mine == [.channelElementMisattributed(
            site: SubmitSite(fileID: "IdentityRuntimeTests/IdentityChannelTests.swift", line: expectedLine),
            expected: Accounts.alice, observed: Accounts.bob)])
    }

    @Test("without strict mode nothing is reported")
    func notStrict() async {
        let (_, issues) = await capturingRuntimeIssues(kinds: ["channelElementMisattributed"]) {
            let channel = IdentityChannel<Int>(bufferSize: 1)
            await IdentityContext.withThreadIdentity(Accounts.alice) { _ = await channel.send(1) }
            var iterator = channel.makeAsyncIterator()
            _ = await iterator.next()?.value
        }
        let mine = issues.filter { $0.site?.fileID.description == "IdentityRuntimeTests/IdentityChannelTests.swift" }
        #expect(mine.isEmpty)
    }
}
