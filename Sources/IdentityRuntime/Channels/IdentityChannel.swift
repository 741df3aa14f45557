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
        /// Each element must be handled under its sender's identity (with ``IdentityMessage/run(_:)-(Value)->R``
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
    private let state: LockedValue<ChannelStateMachine<IdentityMessage<Element>>>

    /// A channel holding up to `bufferSize` elements before senders wait (`0`: rendezvous;
    /// `Int.max`: unbounded).
    public init(bufferSize: Int = 0, handling: Handling = .senderIdentity) {
        precondition(bufferSize >= 0, "bufferSize must not be negative")
        self.bufferSize = bufferSize
        self.handling = handling
        state = LockedValue(ChannelStateMachine(capacity: bufferSize))
    }

    /// Wraps `element` with the identity `flow` gives it, captured now.
    private func message(_ element: Element, flow: IdentityFlow, file: StaticString, line: UInt) -> IdentityMessage<Element> {
        let site: SubmitSite? = handling == .senderIdentity && DiagnosticsScope.current.strict
            ? SubmitSite(fileID: file, line: line) : nil
        return IdentityMessage(value: element, snapshot: IdentitySnapshot.capture(flow: flow), checkedSite: site)
    }

    // MARK: Sending

    /// Sends `element` with the caller's identity (as changed by `flow`), captured now; waits while the
    /// buffer is full.
    ///
    /// - Returns: `true` when the element was accepted (handed to a consumer or buffered); `false` when the
    ///   channel was finished or this task was cancelled while waiting (the element is then withdrawn).
    @discardableResult
    public func send(
        _ element: Element, flow: IdentityFlow = .inherit, file: StaticString = #fileID, line: UInt = #line
    ) async -> Bool {
        let message = message(element, flow: flow, file: file, line: line)
        switch state.withLock({ $0.trySend(message) }) {
        case .dropped: return false
        case .buffered: return true
        case let .deliver(consumer, message):
            consumer.resume(returning: message)
            return true
        case .mustWait:
            break
        }
        let id = state.withLock { $0.makeID() }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
                let action = state.withLock {
                    $0.send(message, id: id, cancelled: Task.isCancelled, continuation: continuation)
                }
                switch action {
                case let .resume(sender, accepted):
                    sender.resume(returning: accepted)
                case let .deliver(sender, consumer, message):
                    consumer.resume(returning: message)
                    sender.resume(returning: true)
                case .wait:
                    break
                }
            }
        } onCancel: {
            state.withLock { $0.cancelSender(id: id) }?.resume(returning: false)
        }
    }

    /// Sends `element` with the caller's identity (as changed by `flow`) without waiting: for synchronous
    /// producers (GCD blocks, operations, callbacks).
    ///
    /// - Returns: `true` when a consumer took it or the buffer had room; `false` when the buffer was full or
    ///   the channel finished (the element is dropped).
    @discardableResult
    public func trySend(
        _ element: Element, flow: IdentityFlow = .inherit, file: StaticString = #fileID, line: UInt = #line
    ) -> Bool {
        switch state.withLock({ $0.trySend(message(element, flow: flow, file: file, line: line)) }) {
        case .dropped, .mustWait: return false
        case .buffered: return true
        case let .deliver(consumer, message):
            consumer.resume(returning: message)
            return true
        }
    }

    /// Accepts no more elements. Elements already accepted are still delivered; senders waiting for room
    /// return `true`; consumers get the end of the sequence once the buffer is empty. Calling it again does
    /// nothing.
    public func finish() {
        let action = state.withLock { $0.finish() }
        for consumer in action.consumers { consumer.resume(returning: nil) }
        for sender in action.senders { sender.resume(returning: true) }
    }

    // MARK: Consuming

    /// Takes the next element, waiting for one; `nil` once the channel is finished and empty, or when the
    /// calling task is cancelled while it waits.
    func next() async -> IdentityMessage<Element>? {
        switch state.withLock({ $0.next() }) {
        case let .produce(message, sender):
            sender?.resume(returning: true)
            return message
        case .wait:
            break
        }
        let id = state.withLock { $0.makeID() }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<IdentityMessage<Element>?, Never>) in
                let action = state.withLock {
                    $0.next(id: id, cancelled: Task.isCancelled, continuation: continuation)
                }
                switch action {
                case let .resume(consumer, message, sender):
                    sender?.resume(returning: true)
                    consumer.resume(returning: message)
                case .wait:
                    break
                }
            }
        } onCancel: {
            state.withLock { $0.cancelConsumer(id: id) }?.resume(returning: nil)
        }
    }

    /// Consumes the channel until it ends, running `body` with each element under its **sender's**
    /// identity (see ``IdentityMessage/run(isolation:_:)``). Returns when the channel is finished and empty
    /// or the calling task is cancelled; an error thrown by `body` ends the loop and is rethrown.
    public func forEach(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Element) async throws -> Void
    ) async rethrows {
        while let message = await next() {
            try await message.run(isolation: isolation, body)
        }
    }

    /// How many elements are buffered now (a snapshot, for tests and metrics).
    public var bufferedCount: Int {
        state.withLock { $0.bufferedCount }
    }

    // MARK: AsyncSequence

    public func makeAsyncIterator() -> Iterator {
        Iterator(channel: self)
    }

    /// Iterates the channel's messages; each is handed to one consumer.
    public struct Iterator: AsyncIteratorProtocol {
        let channel: IdentityChannel<Element>

        public mutating func next() async -> IdentityMessage<Element>? {
            await channel.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> IdentityMessage<Element>? {
            await channel.next()
        }
    }
}
