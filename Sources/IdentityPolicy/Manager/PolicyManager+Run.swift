import Foundation
import IdentityRuntime

extension PolicyManager {
    /// The manager's background work, for the service or app that owns the manager to run: until the calling
    /// task is cancelled, it reads the ``policySource`` again every ``RuntimeSettings/policyPollInterval``
    /// seconds (``reloadPolicies(timeout:)``; the interval is read again after each pass, so a change of
    /// ``settings`` applies at the next one).
    ///
    /// When cancelled, it ends what the manager started on its own and waits for it, then returns:
    /// - an identity switch whose conditional-launch checks are running completes ``SwitchIdentityResult/canceled``
    ///   at once, as a newer call would supersede it; its checks' task is cancelled (a check that ignores
    ///   cancellation is waited for), and what they decide afterwards is ignored (no identity is set, nobody is
    ///   blocked);
    /// - a delegate call (`blockAccount`, `addIdentity` for a completion handler) and an admission for a
    ///   completion handler are not interrupted: `run()` waits for them (a delegate call is bounded by
    ///   ``RuntimeSettings/delegateTimeout``; an admission by its checks), so an account blocked during a
    ///   shutdown is still reported to the delegate.
    ///
    /// Every completion handler of that work has then been called, or dispatched to the queue it runs on.
    /// Work started after `run()` returned is not waited for until `run()` runs and ends again.
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
                // A read that fails is also in the source's `errors` (PolicySource's contract), which its change
                // handler hands to the manager to list and report like every other policy error; the policies in
                // force stay, and the next pass tries again. The thrown copy adds nothing.
                _ = try? await reloadPolicies()
            }
        }
        // A switch started while waiting is ended the same way at the next round.
        repeat {
            abandonSwitchesInFlight()
            await backgroundWork.waitForCurrent()
        } while backgroundWork.count > 0
    }

    /// ``RuntimeSettings/policyPollInterval``, at least a millisecond (a NaN or negative setting included).
    private var pollInterval: Duration {
        .nanoseconds(max(settings.policyPollInterval.clampedNanoseconds, 1_000_000))
    }
}
