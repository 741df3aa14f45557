import Dispatch
import IdentityTesting
import Testing
@testable import IdentityRuntime

/// A class error and a subclass of it: a body typed with the base class may throw the subclass.
private class BaseFailure: Error, @unchecked Sendable {}
private final class DerivedFailure: BaseFailure, @unchecked Sendable {}

private func derived() throws(BaseFailure) -> Int {
    throw DerivedFailure()
}

/// Error types the scopes must pass through untouched, whatever their shape.
@Suite("Identity scopes pass every error type through and restore the identity on throw")
struct ScopeErrorAttackTests {
    @Test("a subclass thrown as its base class comes back as that instance, sync and async")
    func subclassErrorsPassThrough() async {
        do throws(BaseFailure) {
            _ = try IdentityContext.withThreadIdentity(Accounts.alice) { () throws(BaseFailure) -> Int in try derived() }
        } catch {
            #expect(error is DerivedFailure)
        }
        do throws(BaseFailure) {
            _ = try await IdentitySnapshot(identity: Accounts.bob).run { () async throws(BaseFailure) -> Int in
                await Task.yield()
                return try derived()
            }
        } catch {
            #expect(error is DerivedFailure)
        }
        #expect(current == nil)
    }

    @Test("an untyped body throws any Error, and any Error wrapping another error type passes through")
    func untypedBodiesPassThrough() async {
        func untyped() throws -> Int { throw Boom() }
        #expect(throws: Boom.self) { try IdentityContext.withThreadIdentity(Accounts.alice) { try untyped() } }
        await #expect(throws: Boom.self) {
            try await IdentityContext.withThreadIdentity(Accounts.alice) { () async throws -> Int in
                await Task.yield()
                return try untyped()
            }
        }
        #expect(throws: Boom.self) { try IdentityStrictMode.checking { try untyped() } }
        #expect(current == nil)
    }

    @Test("a cancelled task's CancellationError passes through the async scope with its type")
    func cancellationPassesThrough() async {
        let task = Task {
            do throws(CancellationError) {
                try await IdentityContext.withThreadIdentity(Accounts.carol) { () async throws(CancellationError) in
                    withUnsafeCurrentTask { $0?.cancel() }
                    if Task.isCancelled { throw CancellationError() }
                }
                return false
            } catch {
                return current == nil
            }
        }
        #expect(await task.value)
    }

    @Test("every scope form restores the outer identity when its body throws")
    func everyFormRestoresOnThrow() async throws {
        let queue = IdentityDispatchQueue(label: "attack-restore")
        let channel = IdentityChannel<Int>(bufferSize: 1)
        #expect(IdentityContext.withThreadIdentity(Accounts.alice) { channel.trySend(1) })
        channel.finish()
        try await IdentityContext.withThreadIdentity(Accounts.bob) { () async throws in
            #expect(throws: Boom.self) {
                try IdentityContext.withThreadIdentity(Accounts.carol) { () throws(Boom) in
                    IdentityContext.setCurrentThreadIdentity(Accounts.alice)
                    throw Boom()
                }
            }
            #expect(current == Accounts.bob)
            #expect(throws: Boom.self) {
                try IdentitySnapshot(identity: nil).run { () throws(Boom) in throw Boom() }
            }
            #expect(current == Accounts.bob)
            await #expect(throws: Boom.self) {
                try await channel.forEach { (_: Int) async throws(Boom) in
                    #expect(current == Accounts.alice)
                    throw Boom()
                }
            }
            #expect(current == Accounts.bob)
            #expect(throws: Boom.self) {
                try IdentityStrictMode.checking { () throws(Boom) in
                    try queue.sync { () throws(Boom) in throw Boom() }
                }
            }
            #expect(current == Accounts.bob)
            await #expect(throws: Boom.self) {
                try await IdentityStrictMode.checking { () async throws(Boom) in
                    try await IdentityContext.withThreadIdentity(nil) { () async throws(Boom) in throw Boom() }
                }
            }
            #expect(current == Accounts.bob)
        }
        #expect(current == nil)
    }

    @Test("a closure returning a value still gives the value back where the caller needs it")
    func valuesAreNotSwallowedByTheVoidForm() async {
        func sideEffect() -> Int { 7 }
        // Implicit return of the scope from a function: the Void form must not take a value away.
        func read() -> Int { IdentityContext.withThreadIdentity(Accounts.alice) { sideEffect() } }
        func readSnapshot() -> Identity? { IdentitySnapshot(identity: Accounts.bob).run { current } }
        #expect(read() == 7)
        #expect(readSnapshot() == Accounts.bob)
        // A function returning Void whose last expression is the scope.
        let box = LockedValue<Identity?>(nil)
        func write() { IdentityContext.withThreadIdentity(Accounts.carol) { box.withLock { $0 = current } } }
        write()
        #expect(box.withLock { $0 } == Accounts.carol)
    }
}

/// Changes the thread identity with the legacy setter from synchronous code, as a task's callee may.
private func setIdentityFromSynchronousCode(_ identity: Identity?) {
    IdentityContext.setCurrentThreadIdentity(identity)
}

@Suite("A task started immediately inside a scope cannot change the scope's identity")
struct ImmediateTaskAttackTests {
    /// An identity only these tests set, so that capturing its report takes no other suite's issue.
    static let marker = Identity("immediate-task-attack@contoso.com")

    @Test("a Task.immediate body that calls the unscoped setter leaves its creator's scope as it was")
    func immediateTaskCannotChangeItsCreatorsScope() async {
        let marker = Self.marker
        let (seen, issues): (Identity?, [RuntimeIssue]) = await IdentityStrictMode.capturingIssues(
            matching: { $0 == .unscopedChangeInTask(marker) }
        ) {
            await onRawThread {
                IdentityContext.withThreadIdentity(Accounts.alice) { () -> Identity? in
                    Task.immediate { setIdentityFromSynchronousCode(marker) }
                    return current
                }
            }
        }
        #expect(seen == Accounts.alice)
        #expect(issues.contains(.unscopedChangeInTask(marker)))
    }

    @Test("a Task.immediate body inside a queue's unit cannot change the unit's identity")
    func immediateTaskCannotChangeItsUnit() async {
        let queue = IdentityDispatchQueue(label: "attack-immediate")
        let marker = Self.marker
        let (seen, _): (Identity?, [RuntimeIssue]) = await IdentityStrictMode.capturingIssues(
            matching: { $0 == .unscopedChangeInTask(marker) }
        ) {
            await observe { report in
                IdentityContext.withThreadIdentity(Accounts.alice) {
                    queue.async {
                        Task.immediate { setIdentityFromSynchronousCode(marker) }
                        report(current)
                    }
                }
            }
        }
        #expect(seen == Accounts.alice)
    }
}
