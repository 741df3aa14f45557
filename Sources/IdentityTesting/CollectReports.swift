import IdentityRuntime

/// Calls `start` with a reporter, then waits until the reporter has been called `count` times (from any
/// threads) and returns the reported values in the order they arrived.
///
/// ```swift
/// let seen: [Identity?] = await collectReports(2) { report in
///     queue.async { report(IdentityContext.currentThreadIdentity) }
///     Task { report(IdentityContext.currentThreadIdentity) }
/// }
/// ```
public func collectReports<T: Sendable>(
    _ count: Int, _ start: (@escaping @Sendable (T) -> Void) -> Void
) async -> [T] {
    await withCheckedContinuation { (continuation: CheckedContinuation<[T], Never>) in
        let seen = LockedValue<[T]>([])
        start { value in
            let done: [T]? = seen.withLock { seen in
                seen.append(value)
                return seen.count == count ? seen : nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}
