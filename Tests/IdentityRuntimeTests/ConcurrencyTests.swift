import Dispatch
import Foundation
import Testing
@testable import IdentityRuntime

actor Ledger {
    private(set) var seen: [Identity?] = []
    func record() { seen.append(IdentityContext.currentThreadIdentity) }
    func recordAfterSuspending() async {
        await Task.yield()
        try? await Task.sleep(for: .milliseconds(1))
        seen.append(IdentityContext.currentThreadIdentity)
    }
}

@Suite("Swift concurrency: scopes across suspension and actor hops; tasks inherit, detached do not")
struct ConcurrencyTests {
    @Test("the async scope holds across suspension points, actor hops and the main actor",
          arguments: Accounts.submitters)
    func acrossSuspensionAndHops(identity: Identity?) async {
        let ledger = Ledger()
        let seen: [Identity?] = await IdentityContext.withThreadIdentity(identity) {
            var seen: [Identity?] = [current]
            await Task.yield()
            seen.append(current)
            try? await Task.sleep(for: .milliseconds(2))
            seen.append(current)
            await ledger.record()
            await ledger.recordAfterSuspending()
            seen.append(current)
            seen.append(await MainActor.run { current })
            return seen
        }
        #expect(seen == Array(repeating: identity, count: 5))
        #expect(await ledger.seen == [identity, identity])
        #expect(current == nil)
    }

    @Test("nested async scopes restore outward; nil hides the outer identity")
    func nestedAsyncScopes() async {
        let seen: [Identity?] = await IdentityContext.withThreadIdentity(Accounts.alice) {
            let inner: [Identity?] = await IdentityContext.withThreadIdentity(Accounts.bob) {
                let hidden = await IdentityContext.withThreadIdentity(nil) { () async -> Identity? in
                    await Task.yield()
                    return current
                }
                return [current, hidden]
            }
            return inner + [current]
        }
        #expect(seen == [Accounts.bob, nil, Accounts.alice])
    }

    @Test("an async scope rethrows and restores on throw")
    func asyncScopeThrows() async {
        await #expect(throws: Boom.self) {
            try await IdentityContext.withThreadIdentity(Accounts.alice) { () async throws -> Void in
                await Task.yield()
                throw Boom()
            }
        }
        #expect(current == nil)
    }

    @Test("Task {} inherits, Task.detached does not, a snapshot carries into a detached task")
    func unstructuredTasks() async {
        let (inherited, detached, carried): (Identity?, Identity?, Identity?) =
            await IdentityContext.withThreadIdentity(Accounts.alice) {
                let snapshot = IdentitySnapshot.capture()
                return (
                    await Task { current }.value,
                    await Task.detached { current }.value,
                    await Task.detached { await snapshot.run { () async -> Identity? in current } }.value
                )
            }
        #expect(inherited == Accounts.alice)
        #expect(detached == nil)
        #expect(carried == Accounts.alice)
    }

    @Test("task-group children and async let inherit at creation; a child's own scope stays its own")
    func structuredChildren() async {
        let accounts = Accounts.many(8)
        let seen: [Identity?] = await IdentityContext.withThreadIdentity(Accounts.alice) {
            await withTaskGroup(of: [Identity?].self) { group in
                for account in accounts {
                    group.addTask {
                        let inherited = current
                        let own = await IdentityContext.withThreadIdentity(account) { () async -> Identity? in
                            await Task.yield()
                            return current
                        }
                        return [inherited, own]
                    }
                }
                async let bound = current
                var all: [Identity?] = [await bound]
                for await pair in group { all += pair }
                return all
            }
        }
        #expect(seen.filter { $0 == Accounts.alice }.count == 1 + accounts.count)
        #expect(Set(seen.compactMap { $0 }).isSuperset(of: accounts))
    }

    @Test("a snapshot run from async code keeps the identity across suspension")
    func snapshotAsync() async {
        let snapshot = IdentitySnapshot(identity: Accounts.carol)
        let seen = await snapshot.run { () async -> [Identity?] in
            let before = current
            try? await Task.sleep(for: .milliseconds(1))
            return [before, current]
        }
        #expect(seen == [Accounts.carol, Accounts.carol])
        #expect(IdentitySnapshot.capture().identity == nil)
        #expect(IdentitySnapshot.capture(flow: .assign(Accounts.bob)).identity == Accounts.bob)
    }

    @Test("IdentityDispatchQueue.sync and a work item called from async code")
    func dispatchFromAsync() async {
        let queue = IdentityDispatchQueue(label: "from-async")
        let seen: [Identity?] = IdentityContext.withThreadIdentity(Accounts.bob) {
            let synchronous = queue.sync { current }
            let item = IdentityWorkItem { }
            let itemIdentity = item.snapshot.identity
            return [synchronous, itemIdentity, current]
        }
        #expect(seen == [Accounts.bob, Accounts.bob, Accounts.bob])
    }
}
