import ServiceLifecycle

extension RemoteKeySet: Service {
    /// Keeps the set current until cancelled or a graceful shutdown: fetches when the current set's time is up
    /// (``refreshIfStale()``; at once on the first pass), then sleeps until ``nextRefresh``, at least one second
    /// between passes. Failures do not end it: they are retried after
    /// ``Configuration/minimumRefreshInterval`` and kept in ``lastError``. Returns normally when cancelled.
    ///
    /// ```swift
    /// let group = ServiceGroup(services: [keys, server], gracefulShutdownSignals: [.sigterm], logger: logger)
    /// try await group.run()
    /// ```
    public nonisolated func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.refreshIfStale()
                let due = max(await self.nextRefresh, ContinuousClock.now + .seconds(1))
                do { try await Task.sleep(until: due, clock: .continuous) } catch { return }
            }
        }
    }
}
