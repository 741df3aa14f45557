/// The channel's shared state behind one lock, with every operation that may resume a continuation: the
/// non-generic core of ``IdentityChannel``. Continuations are resumed after the lock is released.
@usableFromInline
final class ChannelStorage: Sendable {
    private let state: LockedValue<ChannelStateMachine>
    private let checksHandling: Bool

    @usableFromInline
    init(bufferSize: Int, checksHandling: Bool) {
        state = LockedValue(ChannelStateMachine(capacity: bufferSize))
        self.checksHandling = checksHandling
    }

    /// The send site to record, when strict mode is on now and the channel requires the sender's identity.
    @usableFromInline
    func checkedSite(file: StaticString, line: UInt) -> SubmitSite? {
        guard checksHandling, DiagnosticsScope.current.strict else { return nil }
        return SubmitSite(fileID: file, line: line)
    }

    @usableFromInline
    func trySend(_ message: ChannelMessageBox) -> Bool {
        switch state.withLock({ $0.trySend(message) }) {
        case .dropped, .mustWait: return false
        case .buffered: return true
        case let .deliver(consumer, message):
            consumer.resume(returning: message)
            return true
        }
    }

    @usableFromInline
    func send(_ message: ChannelMessageBox) async -> Bool {
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

    @usableFromInline
    func finish() {
        let action = state.withLock { $0.finish() }
        for consumer in action.consumers { consumer.resume(returning: nil) }
        for sender in action.senders { sender.resume(returning: true) }
    }

    @usableFromInline
    func next() async -> ChannelMessageBox? {
        switch state.withLock({ $0.next() }) {
        case let .produce(message, sender):
            sender?.resume(returning: true)
            return message
        case .wait:
            break
        }
        let id = state.withLock { $0.makeID() }
        let message = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<ChannelMessageBox?, Never>) in
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
        // The sender built the message before it handed it over under this lock and resumed us after
        // releasing it. Taking the lock once more orders this consumer's reads of the message after the
        // sender's writes for ThreadSanitizer too: it does not see the hand-over through a continuation
        // resumed before this task had suspended (the runtime's fast path), and reported the reads as races.
        state.withLock { _ in }
        return message
    }

    @usableFromInline
    var bufferedCount: Int {
        state.withLock { $0.bufferedCount }
    }
}
