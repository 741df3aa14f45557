import IdentityTesting
import Testing
@testable import IdentityRuntime

private enum Inner: Error, Equatable { case failed(Identity?) }
private enum Outer: Error, Equatable { case wrapped(Inner, Identity?) }
private final class ClassFailure: Error, @unchecked Sendable {}

/// An actor whose methods open async scopes: the body must run isolated to it, before and after a throw.
private actor ScopedLedger {
    private(set) var entries: [Identity?] = []

    func record(throwing: Bool) async throws(Inner) -> Int {
        try await IdentityContext.withThreadIdentity(Accounts.carol) { () async throws(Inner) -> Int in
            assertIsolated()
            entries.append(current)
            await Task.yield()
            entries.append(current)
            if throwing { throw .failed(current) }
            return entries.count
        }
    }
}

/// A generic caller: the scope is used where the error type is only known as a parameter.
private func passThrough<E: Error>(_ error: E, as identity: Identity?) throws(E) -> Identity? {
    try IdentityContext.withThreadIdentity(identity) { () throws(E) -> Identity? in
        throw error
    }
}

private func passThroughAsync<E: Error>(_ error: E, as identity: Identity?) async throws(E) -> Identity? {
    try await IdentityContext.withThreadIdentity(identity) { () async throws(E) -> Identity? in
        await Task.yield()
        throw error
    }
}

/// The scopes keep the type of every error their body throws and restore the identity on every way out.
@Suite("Identity scopes keep each error's type and restore the identity on the way out")
struct ScopeErrorTypesTests {
    @Test("a body that cannot throw returns its value from both scope forms without a try")
    func nonThrowingBodies() async {
        let sync: Identity? = IdentityContext.withThreadIdentity(Accounts.alice) { current }
        let async: Identity? = await IdentityContext.withThreadIdentity(Accounts.bob) { () async -> Identity? in
            await Task.yield()
            return current
        }
        let never: Result<Identity?, Never> = IdentityContext.withThreadIdentity(Accounts.carol) { .success(current) }
        #expect(sync == Accounts.alice && async == Accounts.bob && never == .success(Accounts.carol))
        #expect(current == nil)
    }

    @Test("an error caught in an outer scope and rethrown as another type keeps each scope's identity")
    func rethrowingAcrossNestedScopes() async {
        do throws(Outer) {
            try await IdentityContext.withThreadIdentity(Accounts.alice) { () async throws(Outer) in
                do throws(Inner) {
                    try IdentityContext.withThreadIdentity(Accounts.bob) { () throws(Inner) in
                        IdentityContext.setCurrentThreadIdentity(Accounts.carol)
                        throw .failed(current)
                    }
                } catch {
                    // The inner scope and its unscoped change ended with the throw.
                    throw .wrapped(error, current)
                }
            }
            Issue.record("no error")
        } catch {
            #expect(error == .wrapped(.failed(Accounts.carol), Accounts.alice))
        }
        #expect(current == nil)
    }

    @Test("an error typed any Error and a class error come back as the same value")
    func existentialAndClassErrors() async {
        let instance = ClassFailure()
        do throws(any Error) {
            try IdentityContext.withThreadIdentity(Accounts.alice) { () throws(any Error) in throw instance }
        } catch {
            #expect((error as? ClassFailure) === instance)
        }
        do throws(ClassFailure) {
            try await IdentityContext.withThreadIdentity(Accounts.alice) { () async throws(ClassFailure) in
                await Task.yield()
                throw instance
            }
        } catch {
            #expect(error === instance)
        }
        #expect(current == nil)
    }

    @Test("a scope in generic code passes the caller's error type through, sync and async")
    func genericCallers() async {
        #expect(throws: Inner.failed(nil)) { try passThrough(Inner.failed(nil), as: Accounts.alice) }
        await #expect(throws: Inner.failed(Accounts.bob)) {
            try await passThroughAsync(Inner.failed(Accounts.bob), as: Accounts.bob)
        }
        do throws(ClassFailure) {
            _ = try passThrough(ClassFailure(), as: nil)
        } catch {
            #expect(type(of: error) == ClassFailure.self)
        }
        #expect(current == nil)
    }

    @Test("an async scope on an actor runs isolated to it, returns and throws there, and restores the identity")
    func actorIsolatedScopes() async throws {
        let ledger = ScopedLedger()
        #expect(try await ledger.record(throwing: false) == 2)
        await #expect(throws: Inner.failed(Accounts.carol)) { try await ledger.record(throwing: true) }
        #expect(await ledger.entries == [Accounts.carol, Accounts.carol, Accounts.carol, Accounts.carol])
        #expect(current == nil)
    }

    @Test("cancellation inside an async scope throws CancellationError out of it, and the task's identity is restored")
    func cancellationInsideAsyncScope() async {
        let task = Task { () -> [String] in
            await IdentityContext.withThreadIdentity(Accounts.alice) { () async -> [String] in
                do {
                    try await IdentityContext.withThreadIdentity(Accounts.bob) { () async throws in
                        withUnsafeCurrentTask { $0?.cancel() }
                        try await Task.sleep(for: .seconds(3_600))
                    }
                    return ["no error"]
                } catch {
                    return [String(describing: type(of: error)), current?.name ?? "nil"]
                }
            }
        }
        #expect(await task.value == ["CancellationError", Accounts.alice.name])
    }
}
