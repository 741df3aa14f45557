import IdentityRuntime
import NIOCore

/// Identity-carrying callbacks on an `EventLoopFuture`.
///
/// A raw callback (`map { }`, `whenComplete { }`, ...) runs inside whatever completes the promise: on the
/// loop thread, under the identity of the code that called `succeed` or `fail` (`nil` when that is a raw
/// `execute`, another account's when that code ran under one). The identity of the code that *registered*
/// the callback is lost.
///
/// The `flow:` overloads capture the registering code's identity (as `flow` changes it) when the callback
/// is added, and run the callback under it, whoever completes the promise and wherever:
///
/// | written today | with IdentityNIO | the callback observes |
/// |---|---|---|
/// | `future.map { }` | `future.map(flow: .inherit) { }` | the identity of the code that called `map` |
/// | `flatMap`, `flatMapThrowing`, `flatMapError`, `flatMapErrorThrowing`, `recover` | same, with `flow:` | the registrar's |
/// | `whenSuccess`, `whenFailure`, `whenComplete`, `always` | same, with `flow:` | the registrar's |
///
/// Each callback leaves the loop thread as it found it; a chain keeps its identity link by link.
///
/// The overloads are `@inlinable`, like NIO's own: NIO's `whenSuccess`, `map`, ... are generic over the
/// future's value, and called from a non-inlinable generic here they ran unspecialized (value witnesses,
/// metadata lookups): 2,076 of the 3,865 instructions `whenSuccess(flow:)` added per callback.
///
/// ```swift
/// IdentityContext.withThreadIdentity("alice@contoso.com") {
///     client.fetch(on: loop)
///         .map(flow: .inherit) { response in decode(response) }        // alice@contoso.com
///         .whenSuccess(flow: .inherit) { value in cache.store(value) } // alice@contoso.com
/// }
/// ```
extension EventLoopFuture {
    /// `map`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func map<NewValue>(
        flow: IdentityFlow, _ callback: @escaping @Sendable (Value) -> NewValue
    ) -> EventLoopFuture<NewValue> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return map { value in snapshot.run { callback(value) } }
    }

    /// `flatMap`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func flatMap<NewValue: Sendable>(
        flow: IdentityFlow, _ callback: @escaping @Sendable (Value) -> EventLoopFuture<NewValue>
    ) -> EventLoopFuture<NewValue> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return flatMap { value in snapshot.run { callback(value) } }
    }

    /// `flatMapThrowing`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func flatMapThrowing<NewValue>(
        flow: IdentityFlow, _ callback: @escaping @Sendable (Value) throws -> NewValue
    ) -> EventLoopFuture<NewValue> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return flatMapThrowing { value in try snapshot.run { try callback(value) } }
    }

    /// `flatMapError`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func flatMapError(
        flow: IdentityFlow, _ callback: @escaping @Sendable (any Error) -> EventLoopFuture<Value>
    ) -> EventLoopFuture<Value> where Value: Sendable {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return flatMapError { error in snapshot.run { callback(error) } }
    }

    /// `flatMapErrorThrowing`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func flatMapErrorThrowing(
        flow: IdentityFlow, _ callback: @escaping @Sendable (any Error) throws -> Value
    ) -> EventLoopFuture<Value> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return flatMapErrorThrowing { error in try snapshot.run { try callback(error) } }
    }

    /// `recover`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func recover(
        flow: IdentityFlow, _ callback: @escaping @Sendable (any Error) -> Value
    ) -> EventLoopFuture<Value> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return recover { error in snapshot.run { callback(error) } }
    }

    /// `whenSuccess`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func whenSuccess(flow: IdentityFlow, _ callback: @escaping @Sendable (Value) -> Void) {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        whenSuccess { value in snapshot.run { callback(value) } }
    }

    /// `whenFailure`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func whenFailure(flow: IdentityFlow, _ callback: @escaping @Sendable (any Error) -> Void) {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        whenFailure { error in snapshot.run { callback(error) } }
    }

    /// `whenComplete`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func whenComplete(
        flow: IdentityFlow, _ callback: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        whenComplete { result in snapshot.run { callback(result) } }
    }

    /// `always`, with `callback` run under the identity `flow` gives it, captured now.
    @inlinable
    public func always(
        flow: IdentityFlow, _ callback: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) -> EventLoopFuture<Value> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return always { result in snapshot.run { callback(result) } }
    }
}

extension EventLoopPromise where Value: Sendable {
    /// `completeWithTask`, with `body` run under the identity `flow` gives it, captured now.
    ///
    /// NIO's own `completeWithTask(_:)` creates a `Task {}`, so it already inherits the caller's identity
    /// (`flow: .inherit` is the same); `.suppress` and `.assign(x)` run the body as `nil` or `x`. The
    /// promise's callbacks follow the future rules above: raw ones observe the task's completion context,
    /// `flow:` ones their registrar's identity.
    @inlinable
    @discardableResult
    public func completeWithTask(
        flow: IdentityFlow, _ body: @escaping @Sendable () async throws -> Value
    ) -> Task<Void, Never> {
        let snapshot = IdentitySnapshot.capture(flow: flow)
        return completeWithTask { try await snapshot.run { try await body() } }
    }
}
