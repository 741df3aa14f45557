import Foundation
import IdentityRuntime

/// Fans events out to every live `AsyncStream` subscriber and posts the matching notification.
final class PolicyEventBroadcaster: Sendable {
    private let subscribers = LockedValue<(next: Int, continuations: [Int: AsyncStream<PolicyEvent>.Continuation])>((0, [:]))
    let notificationCenter: NotificationCenter

    init(notificationCenter: NotificationCenter) {
        self.notificationCenter = notificationCenter
    }

    func stream() -> AsyncStream<PolicyEvent> {
        let (stream, continuation) = AsyncStream<PolicyEvent>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let id = subscribers.withLock { state in
            defer { state.next += 1 }
            state.continuations[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Posts `event`'s notification to the notification center (with `object`; `userInfo` replaces the
    /// event's own) and yields the event to every subscriber. Call outside every lock.
    func send(_ event: PolicyEvent, object: AnyObject, userInfo: [AnyHashable: Any]? = nil) {
        let continuations = subscribers.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield(event) }
        guard let (name, info) = Self.notification(for: event) else { return }
        notificationCenter.post(name: name, object: object, userInfo: userInfo ?? info)
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
            var info: [AnyHashable: Any] = ["window": window.rawValue]
            if let identity { info["identity"] = identity.name }
            return (.uiIdentityDidChange, info)
        case let .primaryUserDidChange(account): return (.primaryUserDidChange, account.map { ["account": $0.name] })
        case let .allowedAccountsDidChange(accounts): return (.allowedAccountsDidChange, accounts.map { ["accounts": $0.map(\.name)] })
        case let .enrollmentStatus(status): return (.enrollmentStatusDidChange, ["status": status.statusCode.rawValue, "account": status.identity.name])
        case .restartRequired: return (.restartRequired, nil)
        }
    }
}
