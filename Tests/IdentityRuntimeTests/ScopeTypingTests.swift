import IdentityRuntime
import Testing

/// An error type of the test's own, to see that a scope keeps it.
private enum ScopeFailure: Error, Equatable {
    case refused(Int)
}

private func refuse(_ code: Int) throws(ScopeFailure) -> Int {
    throw .refused(code)
}

private func refuseLater(_ code: Int) async throws(ScopeFailure) -> Int {
    await Task.yield()
    throw .refused(code)
}

/// Each catch below binds `error` as `ScopeFailure`, not `any Error`: the tests compile only if the scope
/// passes the closure's error type through.
@Suite("Identity scopes keep the error type and result of their body")
struct ScopeTypingTests {
    @Test("withThreadIdentity rethrows the body's typed error, sync and async, and restores the thread")
    func withThreadIdentityKeepsTypedErrors() async {
        do throws(ScopeFailure) {
            _ = try IdentityContext.withThreadIdentity(Accounts.alice) { () throws(ScopeFailure) -> Int in
                try refuse(1)
            }
            Issue.record("the body threw")
        } catch {
            let typed: ScopeFailure = error
            #expect(typed == .refused(1))
        }
        do throws(ScopeFailure) {
            _ = try await IdentityContext.withThreadIdentity(Accounts.alice) { () async throws(ScopeFailure) -> Int in
                try await refuseLater(2)
            }
            Issue.record("the body threw")
        } catch {
            let typed: ScopeFailure = error
            #expect(typed == .refused(2))
        }
        #expect(IdentityContext.currentThreadIdentity == nil)
    }

    @Test("IdentitySnapshot.run and IdentityStrictMode.checking rethrow the body's typed error")
    func snapshotAndStrictModeKeepTypedErrors() async {
        let snapshot = IdentitySnapshot(identity: Accounts.bob)
        do throws(ScopeFailure) {
            _ = try snapshot.run { () throws(ScopeFailure) -> Int in
                #expect(IdentityContext.currentThreadIdentity == Accounts.bob)
                return try refuse(3)
            }
        } catch {
            let typed: ScopeFailure = error
            #expect(typed == .refused(3))
        }
        do throws(ScopeFailure) {
            _ = try await snapshot.run { () async throws(ScopeFailure) -> Int in try await refuseLater(4) }
        } catch {
            let typed: ScopeFailure = error
            #expect(typed == .refused(4))
        }
        do throws(ScopeFailure) {
            _ = try IdentityStrictMode.checking { () throws(ScopeFailure) -> Int in try refuse(5) }
        } catch {
            let typed: ScopeFailure = error
            #expect(typed == .refused(5))
        }
    }

    @Test("a body that cannot throw needs no try, and its result comes back")
    func nonThrowingBodyNeedsNoTry() async {
        let sync = IdentityContext.withThreadIdentity(Accounts.carol) { IdentityContext.currentThreadIdentity }
        let async = await IdentityContext.withThreadIdentity(Accounts.carol) { () async -> Identity? in
            await Task.yield()
            return IdentityContext.currentThreadIdentity
        }
        let snapshot = IdentitySnapshot(identity: Accounts.alice).run { IdentityContext.currentThreadIdentity }
        #expect(sync == Accounts.carol)
        #expect(async == Accounts.carol)
        #expect(snapshot == Accounts.alice)
    }

    @Test("a Task created in a scope compiles without annotations and inherits the scope's identity")
    func taskInScopeInheritsIdentity() async {
        let task = IdentityContext.withThreadIdentity(Accounts.alice) {
            Task { IdentityContext.currentThreadIdentity }
        }
        #expect(await task.value == Accounts.alice)
        let fromSnapshot = IdentitySnapshot(identity: Accounts.bob).run {
            Task { IdentityContext.currentThreadIdentity }
        }
        #expect(await fromSnapshot.value == Accounts.bob)
        // A Task whose result is not needed: the scope's result is discardable.
        let done = LockedValue<Identity?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            IdentityContext.withThreadIdentity(Accounts.carol) {
                Task {
                    done.withLock { $0 = IdentityContext.currentThreadIdentity }
                    continuation.resume()
                }
            }
        }
        #expect(done.withLock { $0 } == Accounts.carol)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            IdentitySnapshot(identity: Accounts.bob).run {
                Task {
                    done.withLock { $0 = IdentityContext.currentThreadIdentity }
                    continuation.resume()
                }
            }
        }
        #expect(done.withLock { $0 } == Accounts.bob)
    }
}

@Suite("IdentityDispatchQueue.sync and asyncAndWait keep the work's error type")
struct DispatchScopeTypingTests {
    @Test("sync and asyncAndWait throw the work's typed error and return its value")
    func syncKeepsTypedErrors() {
        let queue = IdentityDispatchQueue(label: "scope-typing")
        do throws(ScopeFailure) {
            _ = try queue.sync { () throws(ScopeFailure) -> Int in try refuse(6) }
            Issue.record("the work threw")
        } catch {
            let typed: ScopeFailure = error
            #expect(typed == .refused(6))
        }
        do throws(ScopeFailure) {
            _ = try queue.asyncAndWait { () throws(ScopeFailure) -> Int in try refuse(7) }
            Issue.record("the work threw")
        } catch {
            let typed: ScopeFailure = error
            #expect(typed == .refused(7))
        }
        let seen = IdentityContext.withThreadIdentity(Accounts.alice) {
            queue.sync { IdentityContext.currentThreadIdentity }
        }
        let waited = IdentityContext.withThreadIdentity(Accounts.bob) {
            queue.asyncAndWait { IdentityContext.currentThreadIdentity }
        }
        #expect(seen == Accounts.alice)
        #expect(waited == Accounts.bob)
    }
}
