import Foundation
import IdentityRuntime

extension PolicyManager {
    /// The manager's background work, for the service or app that owns the manager to run: until the calling
    /// task is cancelled, it reads the ``policySource`` again every ``RuntimeSettings/policyPollInterval``
    /// seconds (``reloadPolicies(timeout:)``; the interval is read again after each pass, so a change of
    /// ``settings`` applies at the next one). When cancelled, it cancels the work the manager started on its
    /// own and still has in flight (the checks of an identity switch, which then ends
    /// ``SwitchIdentityResult/canceled``; a delegate call awaited for a completion handler, which then gets
    /// its `.failed` answer; an admission for a completion handler, refused), waits until all of it has ended,
    /// and returns. Every completion handler has then been called, exactly once.
    ///
    /// Nothing runs in the background unless something runs this: the initializer starts nothing. A service
    /// runs it beside its other long-lived work (the IdentityServiceLifecycle integration adapts it to
    /// swift-service-lifecycle's `Service`); an app without a service lifecycle starts it in one line and
    /// cancels the task when it is done:
    ///
    /// ```swift
    /// let policyWork = Task { await PolicyManager.shared.run() }
    /// // ...
    /// policyWork.cancel()
    /// ```
    ///
    /// Without it, policies are read when the manager is made and on ``reloadPolicies(timeout:)`` only (a
    /// source that notifies on its own, such as ``StaticPolicySource``, still applies every change at once),
    /// and a ``RuntimeSettings/policyDirectory`` that could not be read at first stays unread: the manager
    /// keeps refusing operations on owned data (`ProtectionError.policyUnavailable`). A read that fails keeps
    /// the policies in force and is reported like any other (``policyErrors``, the events), and does not end
    /// the loop. The loop runs under no identity, whatever identity the task that runs it has.
    public func run() async {
        await IdentityContext.withThreadIdentity(nil) {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: pollInterval)
                } catch {
                    break
                }
                // Failures are kept by the source and reported by the manager; the next pass tries again.
                _ = try? await reloadPolicies()
            }
        }
        await backgroundWork.cancelAll()
    }

    /// ``RuntimeSettings/policyPollInterval``, at least a millisecond.
    private var pollInterval: Duration {
        let seconds = max(settings.policyPollInterval, 0.001)
        return .nanoseconds(Int64(min(seconds, 1e9) * 1e9))
    }
}
