/// An asynchronous channel whose elements carry the identity of the code that sent them: the way to feed
/// one consumer with many accounts' work and still handle each element as its account.
///
/// Shaped like `AsyncChannel` (swift-async-algorithms) and `AsyncStream`: any number of producers call
/// ``send(_:flow:file:line:)`` (async, waits for room) or ``trySend(_:flow:file:line:)`` (from synchronous
/// code: GCD blocks, operations, callbacks); consumers iterate with `for await`. Each element is an
/// ``IdentityMessage``: the value plus the sender's identity captured at the send.
///
/// ## Propagation
/// | step | captured | observed |
/// |---|---|---|
/// | `send` / `trySend` | at the send (`flow` applies: `.suppress` → nil, `.assign(x)` → x) | — |
/// | `for await message in channel` (the loop body) | nothing | the **consumer's** own identity |
/// | `message.run { value in ... }`, ``forEach(isolation:_:)`` | the message's snapshot | the **sender's** identity, `nil` and `""` included; the consumer's is back afterwards |
///
/// ```swift
/// let orders = IdentityChannel<Order>(bufferSize: 64)
///
/// // Producers, each under its own account:
/// IdentityContext.withThreadIdentity(alice) { queue.async { orders.trySend(order) } }
/// await IdentityContext.withThreadIdentity(bob) { await orders.send(order) }
///
/// // One consumer handles each order as the account that sent it:
/// await orders.forEach { order in
///     try? await store.save(order)        // effectiveFileIdentity is the sender's
/// }
/// ```
///
/// ## Buffering and backpressure
/// `bufferSize` elements are held without making a sender wait (`0`, the default, is a rendezvous as in
/// `AsyncChannel`: `send` returns once a consumer has taken the element). ``send(_:flow:file:line:)``
/// beyond that waits, oldest sender first, until a consumer takes an element; ``trySend(_:flow:file:line:)``
/// returns `false` instead. Elements are delivered in the order they were accepted, each to one consumer.
///
/// ## Finishing and cancellation
/// - ``finish()``: later sends return `false`; elements already accepted are still delivered, waiting
///   senders return `true`, and consumers then get the end of the sequence.
/// - A sender cancelled while it waits withdraws its element and returns `false`.
/// - A consumer cancelled while it waits gets `nil` from `next()`; the channel stays open for others.
///
/// > Warning: A channel nobody finishes keeps its waiting senders waiting when its consumers stop: call
/// > ``finish()`` when the consumer side ends, or cancel the senders.
///
/// > Note: With ``Handling/senderIdentity`` (the default) and strict mode on (``IdentityStrictMode``),
/// > reading ``IdentityMessage/value`` under another identity than the sender's is reported.
public final class IdentityChannel<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = Never

    /// Whether consumers must handle each element under its sender's identity.
    public enum Handling: Sendable, Hashable {
        /// Each element must be handled under its sender's identity (with ``IdentityMessage/run(_:)``
        /// or ``IdentityChannel/forEach(isolation:_:)``); strict mode reports reads of
        /// ``IdentityMessage/value`` under another identity.
        case senderIdentity
        /// Consumers may handle elements under any identity; the sender's is still carried, unchecked.
        case anyIdentity
    }

    /// How many elements are held without making a sender wait.
    public let bufferSize: Int
    /// Whether consumers must handle each element under its sender's identity.
    public let handling: Handling
    @usableFromInline let storage: ChannelStorage

    /// A channel holding up to `bufferSize` elements before senders wait (`0`: rendezvous;
    /// `Int.max`: unbounded).
    public init(bufferSize: Int = 0, handling: Handling = .senderIdentity) {
        precondition(bufferSize >= 0, "bufferSize must not be negative")
        self.bufferSize = bufferSize
        self.handling = handling
        storage = ChannelStorage(bufferSize: bufferSize, checksHandling: handling == .senderIdentity)
    }

    /// Wraps `element` with the identity `flow` gives it, captured now. Inlinable, like every generic entry
    /// point of the channel, so it is specialized for the element type where it is called.
    @inlinable
    func box(_ element: Element, flow: IdentityFlow, file: StaticString, line: UInt) -> ChannelElementBox<Element> {
        ChannelElementBox(
            value: element, snapshot: IdentitySnapshot.capture(flow: flow),
            checkedSite: storage.checkedSite(file: file, line: line))
    }

    // MARK: Sending

    /// Sends `element` with the caller's identity (as changed by `flow`), captured now; waits while the
    /// buffer is full.
    ///
    /// - Returns: `true` when the element was accepted (handed to a consumer or buffered); `false` when the
    ///   channel was finished or this task was cancelled while waiting (the element is then withdrawn).
    @inlinable
    @discardableResult
    public func send(
        _ element: Element, flow: IdentityFlow = .inherit, file: StaticString = #fileID, line: UInt = #line
    ) async -> Bool {
        await storage.send(box(element, flow: flow, file: file, line: line))
    }

    /// Sends `element` with the caller's identity (as changed by `flow`) without waiting: for synchronous
    /// producers (GCD blocks, operations, callbacks).
    ///
    /// - Returns: `true` when a consumer took it or the buffer had room; `false` when the buffer was full or
    ///   the channel finished (the element is dropped).
    @inlinable
    @discardableResult
    public func trySend(
        _ element: Element, flow: IdentityFlow = .inherit, file: StaticString = #fileID, line: UInt = #line
    ) -> Bool {
        storage.trySend(box(element, flow: flow, file: file, line: line))
    }

    /// Accepts no more elements. Elements already accepted are still delivered; senders waiting for room
    /// return `true`; consumers get the end of the sequence once the buffer is empty. Calling it again does
    /// nothing.
    public func finish() {
        storage.finish()
    }

    // MARK: Consuming

    /// Takes the next element, waiting for one; `nil` once the channel is finished and empty, or when the
    /// calling task is cancelled while it waits.
    @inlinable
    func next() async -> IdentityMessage<Element>? {
        guard let message = await storage.next() else { return nil }
        return IdentityMessage(box: unsafeDowncast(message, to: ChannelElementBox<Element>.self))
    }

    /// Consumes the channel until it ends, running `body` with each element under its **sender's**
    /// identity (see ``IdentityMessage/run(isolation:_:)``). Returns when the channel is finished and empty
    /// or the calling task is cancelled; an error thrown by `body` ends the loop and is rethrown with its
    /// type.
    @inlinable
    public func forEach<Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Element) async throws(Failure) -> Void
    ) async throws(Failure) {
        while let message = await next() {
            try await message.run(isolation: isolation, body)
        }
    }

    /// How many elements are buffered now (a snapshot, for tests and metrics).
    public var bufferedCount: Int {
        storage.bufferedCount
    }

    // MARK: AsyncSequence

    @inlinable
    public func makeAsyncIterator() -> Iterator {
        Iterator(channel: self)
    }

    /// Iterates the channel's messages; each is handed to one consumer.
    public struct Iterator: AsyncIteratorProtocol {
        @usableFromInline let channel: IdentityChannel<Element>

        @inlinable
        init(channel: IdentityChannel<Element>) {
            self.channel = channel
        }

        @inlinable
        public mutating func next() async -> IdentityMessage<Element>? {
            await channel.next()
        }

        @inlinable
        public mutating func next(isolation actor: isolated (any Actor)?) async -> IdentityMessage<Element>? {
            await channel.next()
        }
    }
}
