/// An element of an ``IdentityChannel`` with the thread identity of the code that sent it, captured at
/// the send (like an ``IdentitySnapshot``).
///
/// Handle it under that identity with ``run(_:)`` (synchronous) or
/// ``run(isolation:_:)`` (async): the body observes the sender's identity (`nil` stays `nil`, `""` stays
/// `""`), tasks it creates inherit it, and the consumer's identity is back when it returns or throws.
///
/// ```swift
/// for await message in channel {
///     await message.run { order in
///         await store.save(order)   // runs as the account that sent the order
///     }
/// }
/// ```
///
/// > Warning: Reading ``value`` directly handles the element under the *consumer's* identity. When the
/// > channel was made with ``IdentityChannel/Handling/senderIdentity`` and strict mode is on, reading it
/// > under another identity than the sender's is reported as
/// > ``RuntimeIssue/channelElementMisattributed(site:expected:observed:)``.
public struct IdentityMessage<Value: Sendable>: Sendable {
    @usableFromInline let box: ChannelElementBox<Value>

    @inlinable
    init(box: ChannelElementBox<Value>) {
        self.box = box
    }

    /// The sender's identity, captured at the send.
    @inlinable
    public var snapshot: IdentitySnapshot { box.snapshot }

    /// The sender's thread identity, captured at the send.
    @inlinable
    public var identity: Identity? { box.snapshot.identity }

    /// The element, read under the current identity.
    ///
    /// Strict mode reports a read under another identity than the sender's when the channel requires the
    /// sender's identity; inside ``run(_:)`` it always matches.
    @inlinable
    public var value: Value {
        box.checkRead()
        return box.value
    }

    /// The element, without strict mode's check: for code that forwards it without acting on it (logging a
    /// count, measuring a queue).
    @inlinable
    public var unattributedValue: Value { box.value }

    /// Runs `body` with the element, synchronously, under the sender's identity; its error passes through
    /// with its type.
    @inlinable
    @discardableResult
    public func run<R, Failure: Error>(_ body: (Value) throws(Failure) -> R) throws(Failure) -> R {
        try box.snapshot.run { () throws(Failure) -> R in try body(box.value) }
    }

    /// Runs `body` with the element under the sender's identity, across suspension points; child tasks and
    /// `Task {}` created inside inherit it. Its error passes through with its type.
    @inlinable
    @discardableResult
    public func run<R, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Value) async throws(Failure) -> R
    ) async throws(Failure) -> R {
        try await box.snapshot.run(isolation: isolation) { () async throws(Failure) -> R in try await body(box.value) }
    }
}
