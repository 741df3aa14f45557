import IdentityPolicy
import ServiceLifecycle

/// The background work of a ``PolicyManager`` (and of the ``EnrollmentManager`` beside it, if any) as a
/// swift-service-lifecycle `Service`, so that the service's `ServiceGroup` owns it like its server and its other
/// long-lived work.
///
/// ``run()`` runs `PolicyManager.run()` (the policy source re-read every `policyPollInterval`) and
/// `EnrollmentManager.run()` until the group shuts down, gracefully or by cancellation. Then it returns once
/// what the managers started is over: an identity switch whose checks are running ends `.canceled` (nothing
/// set, nobody blocked), delegate calls and admissions for completion handlers are waited for (not
/// interrupted), scheduled enrollment retries and check-ins are called off and those running waited for.
/// Nothing a manager started before the shutdown outlives the group.
///
/// ```swift
/// let policies = PolicyManager(settings: settings)
/// let group = ServiceGroup(
///     services: [PolicyManagerService(policies), server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Run one per manager: two services running the same manager would each end its work when either stops.
public struct PolicyManagerService: Service {
    /// The manager whose background work this runs.
    public let policyManager: PolicyManager
    /// The enrollment manager run beside it, if any.
    public let enrollmentManager: EnrollmentManager?

    /// A service running `policyManager`'s background work and, when given, `enrollmentManager`'s.
    public init(_ policyManager: PolicyManager, enrollment enrollmentManager: EnrollmentManager? = nil) {
        self.policyManager = policyManager
        self.enrollmentManager = enrollmentManager
    }

    /// Runs the managers' background work until the group shuts down or the task is cancelled; returns once
    /// every piece of it has ended. It never throws: failed policy reads are reported by the manager
    /// (`policyErrors`, its events) and retried at the next pass.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await policyManager.run() }
                if let enrollmentManager {
                    group.addTask { await enrollmentManager.run() }
                }
            }
        }
    }
}
