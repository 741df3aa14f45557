/// The state of an ``IdentityChannel``: a buffer, the senders waiting for room and the consumers waiting for
/// an element. Every event returns an action; the caller resumes continuations *after* releasing the lock.
///
/// Invariant while the channel is open: the senders waiting are exactly the owners of the last
/// `buffer.count - capacity` buffered elements, oldest first, so taking one element frees the oldest of them.
///
/// Not generic: elements travel as ``ChannelMessageBox`` references, so this code is compiled once,
/// specialized, whatever the element type (no generic metadata or value witnesses per element).
struct ChannelStateMachine: Sendable {
    typealias Message = ChannelMessageBox
    typealias SenderContinuation = UnsafeContinuation<Bool, Never>
    typealias ConsumerContinuation = UnsafeContinuation<Message?, Never>

    private struct Entry: Sendable {
        let id: UInt64
        let message: Message
    }

    let capacity: Int
    private var buffer = RingBuffer<Entry>()
    private var waitingSenders: [(id: UInt64, continuation: SenderContinuation)] = []
    private var waitingConsumers: [(id: UInt64, continuation: ConsumerContinuation)] = []
    private var nextID: UInt64 = 0
    private(set) var isFinished = false

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// A fresh identifier for a sender or consumer that may have to wait.
    mutating func makeID() -> UInt64 {
        nextID &+= 1
        return nextID
    }

    // MARK: Sending

    enum SendAction {
        /// The channel is finished: the element was dropped.
        case dropped
        /// Hand the message to this waiting consumer; the send is complete.
        case deliver(ConsumerContinuation, Message)
        /// The message was buffered within capacity; the send is complete.
        case buffered
        /// The buffer is over capacity: the sender must wait (``send(_:id:cancelled:continuation:)``).
        case mustWait
    }

    /// A send that does not wait: delivers or buffers within capacity, else changes nothing.
    mutating func trySend(_ message: Message) -> SendAction {
        if isFinished { return .dropped }
        if !waitingConsumers.isEmpty {
            return .deliver(waitingConsumers.removeFirst().continuation, message)
        }
        guard buffer.count < capacity else { return .mustWait }
        buffer.append(Entry(id: 0, message: message))
        return .buffered
    }

    enum WaitingSendAction {
        /// Resume the sender now with this result.
        case resume(SenderContinuation, Bool)
        /// Resume the sender (accepted) and hand the message to a consumer.
        case deliver(SenderContinuation, ConsumerContinuation, Message)
        /// The sender waits until a consumer takes an element, the channel finishes or it is cancelled.
        case wait
    }

    /// A send that may wait: buffers the message beyond capacity and registers the sender.
    /// `cancelled` is the sender's task's cancellation, read under the lock: a cancellation handler that ran
    /// before registration found nothing to cancel, so a cancelled sender never starts waiting.
    mutating func send(
        _ message: Message, id: UInt64, cancelled: Bool, continuation: SenderContinuation
    ) -> WaitingSendAction {
        if isFinished { return .resume(continuation, false) }
        if !waitingConsumers.isEmpty {
            return .deliver(continuation, waitingConsumers.removeFirst().continuation, message)
        }
        if buffer.count < capacity {
            buffer.append(Entry(id: id, message: message))
            return .resume(continuation, true)
        }
        if cancelled { return .resume(continuation, false) }
        buffer.append(Entry(id: id, message: message))
        waitingSenders.append((id, continuation))
        return .wait
    }

    /// A waiting sender was cancelled: its element is withdrawn and it is resumed with `false`.
    mutating func cancelSender(id: UInt64) -> SenderContinuation? {
        guard let index = waitingSenders.firstIndex(where: { $0.id == id }) else { return nil }
        let continuation = waitingSenders.remove(at: index).continuation
        buffer.removeLast(where: { $0.id == id })
        return continuation
    }

    // MARK: Consuming

    enum NextAction {
        /// Return this message (or the end, `nil`), resuming a sender that now has room.
        case produce(Message?, resumeSender: SenderContinuation?)
        /// The consumer waits.
        case wait
    }

    /// Takes the oldest element, if there is one.
    mutating func next() -> NextAction {
        if let entry = buffer.popFirst() {
            let sender = waitingSenders.isEmpty ? nil : waitingSenders.removeFirst().continuation
            return .produce(entry.message, resumeSender: sender)
        }
        if isFinished { return .produce(nil, resumeSender: nil) }
        return .wait
    }

    enum WaitingNextAction {
        case resume(ConsumerContinuation, Message?, resumeSender: SenderContinuation?)
        case wait
    }

    /// Takes the oldest element or registers the consumer.
    /// `cancelled` as in ``send(_:id:cancelled:continuation:)``.
    mutating func next(id: UInt64, cancelled: Bool, continuation: ConsumerContinuation) -> WaitingNextAction {
        switch next() {
        case let .produce(message, sender):
            return .resume(continuation, message, resumeSender: sender)
        case .wait:
            if cancelled { return .resume(continuation, nil, resumeSender: nil) }
            waitingConsumers.append((id, continuation))
            return .wait
        }
    }

    /// A waiting consumer was cancelled: it is resumed with `nil`; the channel stays open for the others.
    mutating func cancelConsumer(id: UInt64) -> ConsumerContinuation? {
        guard let index = waitingConsumers.firstIndex(where: { $0.id == id }) else { return nil }
        return waitingConsumers.remove(at: index).continuation
    }

    // MARK: Finishing

    struct FinishAction {
        /// Consumers to resume with the end (`nil`): the buffer is empty.
        var consumers: [ConsumerContinuation] = []
        /// Senders to resume with `true`: their elements stay buffered and are still delivered.
        var senders: [SenderContinuation] = []
    }

    /// No more sends are accepted; buffered elements are still delivered, then consumers get the end.
    mutating func finish() -> FinishAction {
        guard !isFinished else { return FinishAction() }
        isFinished = true
        let action = FinishAction(
            consumers: waitingConsumers.map(\.continuation), senders: waitingSenders.map(\.continuation))
        waitingConsumers.removeAll()
        waitingSenders.removeAll()
        return action
    }

    /// How many elements are buffered.
    var bufferedCount: Int { buffer.count }
}

/// A first-in first-out buffer with amortized O(1) append and removal at the front.
struct RingBuffer<Element> {
    private var storage: [Element?] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        storage[head] = nil
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Removes the last element matching `predicate`, searching from the back (waiting senders' elements
    /// are at the end).
    mutating func removeLast(where predicate: (Element) -> Bool) {
        var index = storage.count - 1
        while index >= head {
            if let element = storage[index], predicate(element) {
                storage.remove(at: index)
                return
            }
            index -= 1
        }
    }
}
extension RingBuffer: Sendable where Element: Sendable {}
