import Foundation
import IdentityRuntime
import Synchronization

/// Fans events out to every live `AsyncStream` subscriber and posts the matching notification.
///
/// A manager's private notification center (an isolated manager made without one) can have observers only
/// once it has been handed out through ``notificationCenter``; until then a notification for it is not built
/// or posted, since nobody could receive it.
final class PolicyEventBroadcaster: Sendable {
    private let subscribers = LockedValue<(next: Int, continuations: [Int: AsyncStream<PolicyEvent>.Continuation])>((0, [:]))
    private let center: NotificationCenter
    /// Whether a notification can have an observer: the center was given to the manager, or has been handed
    /// out.
    private let centerReachable: Atomic<Bool>
    /// How many subscribers there are (written under the subscribers' lock), so that an event nobody listens
    /// to is not even made.
    private let subscriberCount = Atomic<Int>(0)

    /// A broadcaster posting to `notificationCenter`; `isPrivate`: the manager made that center itself and
    /// nobody else holds it yet.
    init(notificationCenter: NotificationCenter, isPrivate: Bool) {
        center = notificationCenter
        centerReachable = Atomic(!isPrivate)
    }

    /// The center notifications are posted to. Reading it makes the center reachable for observers, so
    /// notifications are posted from then on.
    var notificationCenter: NotificationCenter {
        if !centerReachable.load(ordering: .acquiring) { centerReachable.store(true, ordering: .releasing) }
        return center
    }

    func stream() -> AsyncStream<PolicyEvent> {
        let (stream, continuation) = AsyncStream<PolicyEvent>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let id = subscribers.withLock { state in
            defer { state.next += 1 }
            state.continuations[state.next] = continuation
            subscriberCount.store(state.continuations.count, ordering: .releasing)
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            subscribers.withLock { state in
                state.continuations.removeValue(forKey: id)
                subscriberCount.store(state.continuations.count, ordering: .releasing)
            }
        }
        return stream
    }

    /// Posts `event`'s notification to the notification center (with `object`; `userInfo` replaces the
    /// event's own) and yields the event to every subscriber. Call outside every lock.
    ///
    /// With no subscriber and a center nobody can observe, neither the event nor the notification is made.
    func send(
        _ event: @autoclosure () -> PolicyEvent, object: AnyObject,
        userInfo: @autoclosure () -> [AnyHashable: Any]? = nil
    ) {
        let reachable = centerReachable.load(ordering: .acquiring)
        guard reachable || subscriberCount.load(ordering: .acquiring) > 0 else { return }
        let event = event()
        let continuations = subscribers.withLock { $0.continuations.isEmpty ? [] : Array($0.continuations.values) }
        for continuation in continuations { continuation.yield(event) }
        guard reachable, let (name, info) = Self.notification(for: event) else { return }
        center.post(name: name, object: object, userInfo: userInfo() ?? info)
    }

    /// The notification of `event`; `nil` for events whose content a notification carries already.
    private static func notification(for event: PolicyEvent) -> (Notification.Name, [AnyHashable: Any]?)? {
        switch event {
        case .policyDidChange: return (.policyDidChange, nil)
        case .accountPoliciesDidChange: return nil
        case let .accountManaged(account): return (.managedAccountsDidChange, ["account": account.name, "managed": true])
        case let .accountUnmanaged(account): return (.managedAccountsDidChange, ["account": account.name, "managed": false])
        case let .accountBlocked(account, reason): return (.blockedAccountsDidChange, ["account": account.name, "reason": reason.rawValue])
        case let .accountUnblocked(account): return (.blockedAccountsDidChange, ["account": account.name])
        case let .wipeDidComplete(account): return (.wipeDidComplete, ["account": account.name])
        case let .uiIdentityDidChange(window, identity):
            // Built with the keys made once: a dictionary literal of string keys boxes and casts each key on
            // every post.
            var info = [AnyHashable: Any](minimumCapacity: 2)
            info[Keys.window] = window.rawValue
            if let identity { info[Keys.identity] = identity.name }
            return (.uiIdentityDidChange, info)
        case let .primaryUserDidChange(account): return (.primaryUserDidChange, account.map { ["account": $0.name] })
        case let .allowedAccountsDidChange(accounts): return (.allowedAccountsDidChange, accounts.map { ["accounts": $0.map(\.name)] })
        case let .enrollmentStatus(status): return (.enrollmentStatusDidChange, ["status": status.statusCode.rawValue, "account": status.identity.name])
        case .restartRequired: return (.restartRequired, nil)
        case let .policyErrorsDidChange(errors): return (.policyErrorsDidChange, ["errors": errors.map(\.description)])
        }
    }

    /// `AnyHashable` is not `Sendable` only because it may box any value; these box immutable strings and are
    /// never mutated.
    private enum Keys {
        nonisolated(unsafe) static let window = AnyHashable("window")
        nonisolated(unsafe) static let identity = AnyHashable("identity")
    }
}
