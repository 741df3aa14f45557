import Dispatch
import IdentityRuntime
import Testing

/// Expects the current thread or task to have `expected` as its thread identity.
public func expectThreadIdentity(_ expected: Identity?, sourceLocation: SourceLocation = #_sourceLocation) {
    let observed = IdentityContext.currentThreadIdentity
    #expect(observed == expected, "thread identity", sourceLocation: sourceLocation)
}

/// Expects the effective file identity (thread, else process) to be `expected`.
public func expectEffectiveFileIdentity(_ expected: Identity?, sourceLocation: SourceLocation = #_sourceLocation) {
    let observed = IdentityContext.effectiveFileIdentity
    #expect(observed == expected, "effective file identity", sourceLocation: sourceLocation)
}

/// Expects the effective UI identity for `window` (nil: the key window) to be `expected`.
public func expectEffectiveUIIdentity(
    _ expected: Identity?, for window: WindowID? = nil, sourceLocation: SourceLocation = #_sourceLocation
) {
    let observed = IdentityContext.effectiveUIIdentity(for: window)
    #expect(observed == expected, "effective UI identity", sourceLocation: sourceLocation)
}

/// Expects no identity to be left behind: none on the calling thread (outside its scopes), and none on the
/// global queues' worker threads, which are probed with raw (unwrapped) blocks. Call at the end of a test.
public func assertNoIdentityLeaks(sourceLocation: SourceLocation = #_sourceLocation) {
    let here = IdentityContext.currentThreadIdentity
    #expect(here == nil, "identity left on the calling thread", sourceLocation: sourceLocation)
    let leftovers = IdentityLeakProbe.leftoverIdentitiesOnWorkers()
    #expect(leftovers.isEmpty, "identities left on worker threads: \(leftovers)", sourceLocation: sourceLocation)
}

/// Raw probes of the shared worker pool.
public enum IdentityLeakProbe {
    /// Runs `probes` raw blocks across the global pool and returns the identities any of them found.
    public static func leftoverIdentitiesOnWorkers(probes: Int = 256) -> [Identity] {
        let found = LockedValue<[Identity]>([])
        DispatchQueue.concurrentPerform(iterations: probes) { _ in
            if let identity = IdentityContext.currentThreadIdentity {
                found.withLock { $0.append(identity) }
            }
        }
        return found.withLock { $0 }
    }
}
