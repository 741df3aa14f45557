import Dispatch
import Foundation
import Testing
@testable import IdentityRuntime

@Suite("Overrides inside a unit, and worker hygiene afterwards")
struct OverrideAndHygieneTests {
    /// A serial queue whose blocks are followed by raw blocks that check what the worker is left with.
    let queue = IdentityDispatchQueue(label: "hygiene")

    @Test("a scoped override lasts for the scope; the unit then sees its captured identity again",
          arguments: Accounts.submitters)
    func scopedOverride(captured: Identity?) async {
        let seen: [Identity?] = await observe { report in
            IdentityContext.withThreadIdentity(captured) {
                queue.async {
                    let inside = IdentityContext.withThreadIdentity(Accounts.bob) { current }
                    let hidden = IdentityContext.withThreadIdentity(nil) { current }
                    report([inside, hidden, current])
                }
            }
        }
        #expect(seen == [Accounts.bob, nil, captured])
    }

    @Test("an unscoped override lasts for the rest of the unit only", arguments: Accounts.submitters)
    func unscopedOverride(captured: Identity?) async {
        let seen: [Identity?] = await collect(3) { report in
            IdentityContext.withThreadIdentity(captured) {
                queue.async {
                    IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                    report(current)
                    // Work submitted after the change carries the new identity, so does a task.
                    queue.async { report(current) }
                    Task { report(current) }
                }
            }
        }
        #expect(seen == [Accounts.bob, Accounts.bob, Accounts.bob])
        let next: Identity? = await observe { report in
            IdentityContext.withThreadIdentity(captured) { queue.async { report(current) } }
        }
        #expect(next == captured)
        let raw: Identity? = await observe { report in queue.underlying.async { report(current) } }
        #expect(raw == nil)
    }

    @Test("an unscoped override to nil hides the captured identity for the rest of the unit")
    func unscopedOverrideToNil() async {
        let seen: [Identity?] = await observe { report in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                queue.async {
                    let before = current
                    IdentityContext.setCurrentThreadIdentity(nil)
                    report([before, current])
                }
            }
        }
        #expect(seen == [Accounts.alice, nil])
    }

    @Test("after a unit throws, the worker is back to what it was and the next unit sees its own identity")
    func hygieneAfterThrow() async {
        let thrown: Bool = await onRawThread {
            do {
                try IdentitySnapshot(identity: Accounts.alice).run {
                    IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                    throw Boom()
                }
                return false
            } catch {
                return error is Boom && current == nil
            }
        }
        #expect(thrown)
        let syncThrow: [Identity?] = await observe { report in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                do {
                    try queue.sync {
                        IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                        throw Boom()
                    }
                } catch {
                    report([current])
                }
            }
        }
        #expect(syncThrow == [Accounts.alice])
    }

    @Test("the same worker thread runs units of different identities back to back without leaks")
    func sameWorkerSequence() async {
        let sequence: [Identity?] = [Accounts.alice, nil, .unmanaged, Accounts.bob, nil]
        let seen: [[Identity?]] = await onRawThread {
            sequence.map { identity in
                IdentitySnapshot(identity: identity).run {
                    let inside = current
                    IdentityContext.setCurrentThreadIdentity(Accounts.carol)
                    return [inside, current]
                } + [current]
            }
        }
        #expect(seen == sequence.map { [$0, Accounts.carol, nil] })
    }

    @Test("a unit hides an identity the worker thread was left with by unwrapped code")
    func unitHidesLeftoverThreadIdentity() async {
        let seen: [Identity?] = await onRawThread {
            IdentityContext.setCurrentThreadIdentity(Accounts.bob)
            let before = current
            let insideNil = IdentitySnapshot(identity: nil).run { current }
            let insideAlice = IdentitySnapshot(identity: Accounts.alice).run { current }
            let after = current
            IdentityContext.setCurrentThreadIdentity(nil)
            return [before, insideNil, insideAlice, after, current]
        }
        #expect(seen == [Accounts.bob, nil, Accounts.alice, Accounts.bob, nil])
    }

    @Test("outside any scope the unscoped setter sets the thread's identity; wrapped submissions capture it")
    func unscopedAtTopLevel() async {
        let seen: [Identity?] = await collect(2) { report in
            Thread {
                IdentityContext.setCurrentThreadIdentity(Accounts.alice)
                report(current)
                queue.async { report(current) }
                IdentityContext.setCurrentThreadIdentity(nil)
            }.start()
        }
        #expect(seen == [Accounts.alice, Accounts.alice])
    }

    @Test("nested scopes restore outward, one level at a time")
    func nestedScopes() {
        let seen = IdentityContext.withThreadIdentity(Accounts.alice) {
            let first = current
            let (inner, afterSet): (Identity?, Identity?) = IdentityContext.withThreadIdentity(Accounts.bob) {
                let inner = current
                IdentityContext.setCurrentThreadIdentity(Accounts.carol)
                return (inner, current)
            }
            return [first, inner, afterSet, current]
        }
        #expect(seen == [Accounts.alice, Accounts.bob, Accounts.carol, Accounts.alice])
    }

    @Test("a task created inside a unit keeps its identity after the unit ends")
    func taskOutlivesUnit() async {
        let seen: Identity? = await observe { report in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                queue.async {
                    Task {
                        try? await Task.sleep(for: .milliseconds(20))
                        report(current)
                    }
                }
            }
            queue.async(flow: .assign(Accounts.bob)) {}
        }
        #expect(seen == Accounts.alice)
    }

    @Test("a unit releases its work and captures when it returns, even while a task it created runs on")
    func unitReleasesWorkWhenItReturns() async {
        final class Payload: Sendable {}
        // The task waits on this stream, so it holds the unit's frame until the stream finishes.
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        let probe = LockedValue<Task<Identity?, Never>?>(nil)
        nonisolated(unsafe) weak var weakPayload: Payload?
        IdentityContext.withThreadIdentity(Accounts.alice) {
            let payload = Payload()
            weakPayload = payload
            queue.async {
                withExtendedLifetime(payload) {
                    probe.withLock {
                        $0 = Task {
                            for await _ in gate {}
                            return current
                        }
                    }
                }
            }
        }
        // The queue is serial: once this block has run, the unit has returned.
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        #expect(weakPayload == nil, "the unit's closure (and its captures) must not live as long as its tasks")
        openGate.finish()
        #expect(await probe.withLock { $0 }?.value == Accounts.alice)
    }

    @Test("a prepared unit run a second time runs nothing and reports unitRanTwice")
    func unitRunTwice() async {
        let runs = LockedValue(0)
        let unit = IdentitySnapshot(identity: Accounts.alice).prepare(site: .unknown) {
            runs.withLock { $0 += 1 }
        }
        let (_, issues) = await capturingRuntimeIssues(kinds: ["unitRanTwice"]) {
            unit.run()
            unit.run()
        }
        #expect(runs.withLock { $0 } == 1)
        #expect(issues.contains { $0.site == .unknown })
    }
}
