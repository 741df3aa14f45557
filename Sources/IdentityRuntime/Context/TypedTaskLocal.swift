extension TaskLocal {
    /// `withValue(_:operation:)` that keeps the operation's error type.
    ///
    /// The standard library's `withValue` rethrows `any Error`; the only error it can rethrow is the one
    /// `operation` threw, so the cast back to `Failure` cannot fail.
    @inlinable
    func withValue<R, Failure: Error>(
        _ value: Value, typed operation: () throws(Failure) -> R
    ) throws(Failure) -> R {
        do {
            return try withValue(value, operation: operation)
        } catch {
            throw error as! Failure
        }
    }

    /// The asynchronous `withValue(_:operation:isolation:)`, keeping the operation's error type.
    @inlinable
    func withValue<R, Failure: Error>(
        _ value: Value, isolation: isolated (any Actor)?, typed operation: () async throws(Failure) -> R
    ) async throws(Failure) -> R {
        do {
            return try await withValue(value, operation: operation, isolation: isolation)
        } catch {
            throw error as! Failure
        }
    }
}
