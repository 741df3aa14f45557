import Dispatch
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import NIOConcurrencyHelpers
import ServiceLifecycle

/// The connections of one instance of a fleet to the fleet's PostgreSQL database, shared by its
/// ``PostgresKeyStore`` and ``PostgresPolicySource``.
///
/// - A *query* connection runs the stores' queries, one at a time, each with ``PostgresFleetConfiguration/queryTimeout``.
/// - A *notification* connection `LISTEN`s on the channels `identity_keys` and `identity_policies`, which the
///   schema's triggers `NOTIFY` on every change, and sends a heartbeat (`SELECT 1`) every second, so a database
///   that stops answering is noticed within about ``PostgresFleetConfiguration/queryTimeout`` plus one second.
/// - The first successful connection applies the schema's missing migrations (idempotent; see Sources/IdentityRuntime/IdentityRuntime.docc/RunningAFleet.md).
///
/// Creating a fleet never blocks and never fails: it connects in the background and keeps reconnecting
/// (every ``PostgresFleetConfiguration/reconnectInterval``, backing off to
/// ``PostgresFleetConfiguration/maximumReconnectInterval``) until it is shut down. Use
/// ``waitUntilReady(timeout:)`` to start only once the database answered.
///
/// Nothing here blocks a thread: queries are awaited on SwiftNIO's event loops, and every call of a store has
/// one deadline (``PostgresFleetConfiguration/callTimeout``) that bounds whatever it waits on. The stores'
/// synchronous requirements (for GCD and `OperationQueue` code) answer from their caches and, on a miss, wait
/// through `StoreBridge`, which never blocks a Swift task that uses the managers' `async` entry points.
///
/// A fleet is a swift-service-lifecycle `Service`: run it in the service group, and a graceful shutdown (or
/// cancellation) closes its connections.
///
/// ```swift
/// let fleet = PostgresFleet(configuration: .fromEnvironment()!)
/// let keys = PostgresKeyStore(fleet: fleet, keyEncryptionKeys: try StaticKeyEncryptionKeys(environmentVariable: "IDENTITY_KEK"))
/// let policies = PostgresPolicySource(fleet: fleet)
/// let group = ServiceGroup(services: [fleet, app], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await fleet.waitUntilReady(timeout: 10)
/// try await group.run()
/// ```
public final class PostgresFleet: Service, Sendable {
    /// What the fleet's connections are doing.
    public struct Status: Sendable, Equatable {
        /// The query connection is open and the schema is up to date.
        public var isConnected: Bool
        /// The notification connection is open and listening: changes made elsewhere are heard.
        public var isListening: Bool
        /// The last connection or query failure, if any since the last success.
        public var lastError: PostgresFleetError?
        /// How many times the notification connection was (re)established.
        public var listenConnections: Int
    }

    /// The events a store registers for: a notification, or a change of the notification connection.
    enum Event: Sendable {
        case notification(channel: String, payload: String)
        /// Listening (again) since `epoch`: notifications sent before may have been missed.
        case listening(epoch: Int)
        /// Not listening since `at` (uptime nanoseconds).
        case notListening(epoch: Int, at: UInt64)
    }

    /// The database settings and timeouts.
    public let configuration: PostgresFleetConfiguration
    let logger: Logger
    private let eventLoopGroup: any EventLoopGroup
    private let state: NIOLockedValueBox<State>
    private let timer: DispatchSourceTimerBox

    static let channels = ["identity_keys", "identity_policies"]

    private enum Link {
        case idle
        case connecting(attempt: Int, future: EventLoopFuture<PostgresConnection>)
        case connected(PostgresConnection)
        case failed(PostgresFleetError, retryAt: UInt64)
    }

    private enum ListenLink {
        case idle(retryAt: UInt64)
        case connecting(attempt: Int)
        case listening(attempt: Int, connection: PostgresConnection, heartbeatInFlight: Bool, lastHeartbeat: UInt64)
    }

    private struct State {
        var query: Link = .idle
        var listen: ListenLink = .idle(retryAt: 0)
        var migrated = false
        var isShutDown = false
        var attempts = 0
        var backoff: TimeInterval
        var lastError: PostgresFleetError?
        var listenEpoch = 0
        var listenConnections = 0
        var lostAt: UInt64
        var observers: [Int: @Sendable (Event) -> Void] = [:]
        var nextObserver = 0
        /// The ``run()`` calls waiting for the shutdown.
        var runners: [CheckedContinuation<Void, Never>] = []
    }

    /// A fleet connection to the database `configuration` names. Connecting starts at once, in the background.
    /// - Parameter logger: where PostgresNIO and the fleet log (nothing by default).
    public init(
        configuration: PostgresFleetConfiguration,
        logger: Logger = Logger(label: "identity-postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.configuration = configuration
        self.logger = logger
        self.eventLoopGroup = MultiThreadedEventLoopGroup.singleton
        self.state = NIOLockedValueBox(State(backoff: configuration.reconnectInterval, lostAt: Self.now()))
        self.timer = DispatchSourceTimerBox(
            DispatchSource.makeTimerSource(queue: DispatchQueue(label: "identity-postgres.fleet.maintenance")))
        let interval = DispatchTimeInterval.milliseconds(Int(max(min(configuration.reconnectInterval, 0.25), 0.01) * 1000))
        timer.source.schedule(deadline: .now(), repeating: interval, leeway: .milliseconds(10))
        timer.source.setEventHandler { [weak self] in self?.maintain() }
        timer.source.resume()
    }

    deinit {
        // A fleet dropped without shutdown() still closes its connections.
        shutdown()
    }

    /// The connections' state now.
    public var status: Status {
        state.withLockedValue { state in
            var connected = false
            if case let .connected(connection) = state.query, !connection.isClosed { connected = true }
            var listening = false
            if case .listening = state.listen { listening = true }
            return Status(
                isConnected: connected, isListening: listening, lastError: state.lastError,
                listenConnections: state.listenConnections)
        }
    }

    /// Returns once the query connection is up (schema migrated) and the notification connection listens;
    /// suspends meanwhile, never blocking a thread.
    /// - Throws: ``PostgresFleetError/unavailable(reason:)`` with the last failure when `timeout` seconds
    ///   passed first; ``PostgresFleetError/shutDown`` after ``shutdown()``.
    public func waitUntilReady(timeout: TimeInterval) async throws(PostgresFleetError) {
        let deadline = ContinuousClock.now + .nanoseconds(Int64(Self.nanoseconds(timeout)))
        while true {
            if state.withLockedValue({ $0.isShutDown }) { throw .shutDown }
            let status = self.status
            if status.isConnected && status.isListening { return }
            if !status.isConnected {
                // Ask for the connection; a failure inside the retry interval returns at once.
                do throws(PostgresFleetError) {
                    _ = try await connection(deadline: min(deadline, ContinuousClock.now + .nanoseconds(Int64(Self.nanoseconds(configuration.connectTimeout)))))
                } catch {
                    if case .shutDown = error { throw error }
                }
            }
            if ContinuousClock.now >= deadline {
                throw .unavailable(reason: "not ready after \(timeout) s: \(self.status.lastError?.description ?? "no answer yet")")
            }
            // A cancelled wait ends now, as not ready: sleeping again would spin until the deadline.
            do { try await Task.sleep(for: .milliseconds(10)) } catch {
                throw .unavailable(reason: "the wait for readiness was cancelled")
            }
        }
    }

    /// Keeps the fleet connected until the service group shuts down gracefully or the task is cancelled, then
    /// closes its connections (``shutdown()``) and returns. The fleet connects from its creation on, whether or
    /// not this runs; running it ties its lifetime to the group's.
    public func run() async throws {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLockedValue { state -> Bool in
                        if state.isShutDown { return true }
                        state.runners.append(continuation)
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onGracefulShutdown: {
                self.shutdown()
            }
        } onCancel: {
            self.shutdown()
        }
    }

    /// Closes both connections and stops reconnecting. Operations then fail with ``PostgresFleetError/shutDown``;
    /// ``run()`` returns.
    public func shutdown() {
        timer.source.cancel()
        let (query, listen) = state.withLockedValue { state -> (PostgresConnection?, PostgresConnection?) in
            state.isShutDown = true
            var query: PostgresConnection?
            var listen: PostgresConnection?
            if case let .connected(connection) = state.query { query = connection }
            if case let .listening(_, connection, _, _) = state.listen { listen = connection }
            state.query = .failed(.shutDown, retryAt: .max)
            state.listen = .idle(retryAt: .max)
            return (query, listen)
        }
        let runners = state.withLockedValue { state in
            defer { state.runners = [] }
            return state.runners
        }
        runners.forEach { $0.resume() }
        query?.close().whenComplete { _ in }
        listen?.close().whenComplete { _ in }
    }

    // MARK: Observers

    /// Registers `observer` and returns its token and whether the fleet is listening now (with the epoch and,
    /// when not, since when), atomically with the registration.
    func addObserver(_ observer: @escaping @Sendable (Event) -> Void) -> (token: Int, now: Event) {
        state.withLockedValue { state in
            let token = state.nextObserver
            state.nextObserver += 1
            state.observers[token] = observer
            if case .listening = state.listen { return (token, .listening(epoch: state.listenEpoch)) }
            return (token, .notListening(epoch: state.listenEpoch, at: state.lostAt))
        }
    }

    func removeObserver(_ token: Int) {
        _ = state.withLockedValue { $0.observers.removeValue(forKey: token) }
    }

    private func broadcast(_ event: Event) {
        let observers = state.withLockedValue { Array($0.observers.values) }
        for observer in observers { observer(event) }
    }

    // MARK: Queries

    /// The deadline of a call that starts now: ``PostgresFleetConfiguration/callTimeout`` from now, or the
    /// caller's `deadline` when that is earlier.
    func callDeadline(_ deadline: ContinuousClock.Instant? = nil) -> ContinuousClock.Instant {
        let own = ContinuousClock.now + .nanoseconds(Int64(Self.nanoseconds(configuration.callTimeout)))
        guard let deadline else { return own }
        return min(own, deadline)
    }

    /// Runs `query` on the query connection and returns its rows, suspending (never blocking a thread) until
    /// they arrive or `deadline` passes. Connecting first, when there is no connection, counts against the same
    /// deadline: a call never waits longer than its deadline, whatever it waits on.
    /// - Parameter operation: names the operation in errors.
    func query(
        _ query: PostgresQuery, operation: String, deadline: ContinuousClock.Instant
    ) async throws(PostgresFleetError) -> [PostgresRow] {
        let connection = try await self.connection(deadline: deadline)
        let queryDeadline = min(deadline, ContinuousClock.now + .nanoseconds(Int64(Self.nanoseconds(configuration.queryTimeout))))
        do throws(PostgresFleetError) {
            return try await Self.value(of: connection.query(query, logger: logger).map { $0.rows }, by: queryDeadline, operation: operation)
        } catch {
            switch error {
            case .timedOut, .unavailable:
                // A database that does not answer in time is treated as lost: close, reconnect later.
                drop(connection, because: error)
            default:
                break
            }
            throw error
        }
    }

    /// The open query connection, connecting (and migrating) first when there is none, by `deadline`.
    private func connection(deadline: ContinuousClock.Instant) async throws(PostgresFleetError) -> PostgresConnection {
        enum Next {
            case ready(PostgresConnection)
            case wait(EventLoopFuture<PostgresConnection>)
            case fail(PostgresFleetError)
        }
        let now = Self.now()
        let next: Next = state.withLockedValue { state in
            if state.isShutDown { return .fail(.shutDown) }
            switch state.query {
            case let .connected(connection) where !connection.isClosed:
                return .ready(connection)
            case let .connecting(_, future):
                return .wait(future)
            case let .failed(error, retryAt) where now < retryAt:
                return .fail(error)
            default:
                return .wait(startConnecting(&state))
            }
        }
        switch next {
        case let .ready(connection):
            return connection
        case let .fail(error):
            throw error
        case let .wait(future):
            return try await Self.value(of: future, by: deadline, operation: "connecting to \(configuration.host):\(configuration.port)")
        }
    }

    /// Starts a connection attempt (with migrations when they were not applied yet) and records it in `state`.
    private func startConnecting(_ state: inout State) -> EventLoopFuture<PostgresConnection> {
        state.attempts += 1
        let attempt = state.attempts
        let migrated = state.migrated
        let eventLoop = eventLoopGroup.next()
        let logger = self.logger
        let future = PostgresConnection.connect(
            on: eventLoop, configuration: configuration.connectionConfiguration, id: attempt, logger: logger
        ).flatMap { connection -> EventLoopFuture<PostgresConnection> in
            if migrated { return eventLoop.makeSucceededFuture(connection) }
            return FleetSchema.migrate(on: connection, logger: logger).map { connection }.flatMapError { error in
                connection.close().flatMapThrowing { throw error }.flatMapErrorThrowing { _ in throw error }
            }
        }
        state.query = .connecting(attempt: attempt, future: future)
        let timeout = configuration.connectTimeout
        let scheduled = eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout * 1e9))) { [weak self] in
            self?.connectFinished(attempt: attempt, .failure(PostgresFleetError.timedOut(operation: "connecting", seconds: timeout)))
        }
        future.whenComplete { [weak self] result in
            scheduled.cancel()
            guard let self else {
                if case let .success(connection) = result { connection.close().whenComplete { _ in } }
                return
            }
            self.connectFinished(attempt: attempt, result.mapError { $0 })
        }
        return future
    }

    private func connectFinished(attempt: Int, _ result: Result<PostgresConnection, any Error>) {
        let (surplus, opened): (PostgresConnection?, PostgresConnection?) = state.withLockedValue { state in
            guard case let .connecting(current, _) = state.query, current == attempt else {
                if case let .success(connection) = result { return (connection, nil) }
                return (nil, nil)
            }
            switch result {
            case let .success(connection):
                state.query = .connected(connection)
                state.migrated = true
                state.lastError = nil
                state.backoff = configuration.reconnectInterval
                return (nil, connection)
            case let .failure(error):
                // Whatever failed while connecting (refused, "not yet accepting connections"), the database is unavailable.
                let fleetError = PostgresFleetError.unavailable(
                    reason: PostgresFleetError.from(error, operation: "connecting to \(configuration.host):\(configuration.port)").description)
                state.lastError = fleetError
                state.query = .failed(fleetError, retryAt: Self.now() + Self.nanoseconds(state.backoff))
                state.backoff = min(state.backoff * 2, configuration.maximumReconnectInterval)
                return (nil, nil)
            }
        }
        surplus?.close().whenComplete { _ in }
        // Registered outside the lock: a future already complete runs its callback at once.
        if let opened {
            opened.closeFuture.whenComplete { [weak self] _ in
                self?.drop(opened, because: .unavailable(reason: "the connection was closed"))
            }
        }
    }

    /// Forgets `connection` as the query connection (when it still is) and closes it.
    private func drop(_ connection: PostgresConnection, because error: PostgresFleetError) {
        state.withLockedValue { state in
            if case let .connected(current) = state.query, current === connection {
                state.query = .idle
                state.lastError = error
            }
        }
        if !connection.isClosed { connection.close().whenComplete { _ in } }
    }

    // MARK: Maintenance: reconnecting, listening, heartbeats

    private func maintain() {
        enum Action {
            case none
            case listen(attempt: Int)
            case heartbeat(PostgresConnection, attempt: Int)
        }
        let now = Self.now()
        let (action, reconnectQuery): (Action, Bool) = state.withLockedValue { state in
            if state.isShutDown { return (.none, false) }
            var reconnectQuery = false
            if case let .failed(_, retryAt) = state.query, now >= retryAt { reconnectQuery = true }
            if case .idle = state.query { reconnectQuery = true }
            if reconnectQuery { _ = startConnecting(&state) }
            switch state.listen {
            case let .idle(retryAt) where now >= retryAt:
                state.attempts += 1
                state.listen = .connecting(attempt: state.attempts)
                return (.listen(attempt: state.attempts), reconnectQuery)
            case let .listening(attempt, connection, false, last) where now - last >= 1_000_000_000:
                state.listen = .listening(attempt: attempt, connection: connection, heartbeatInFlight: true, lastHeartbeat: last)
                return (.heartbeat(connection, attempt: attempt), reconnectQuery)
            default:
                return (.none, reconnectQuery)
            }
        }
        _ = reconnectQuery
        switch action {
        case .none:
            break
        case let .listen(attempt):
            startListening(attempt: attempt)
        case let .heartbeat(connection, attempt):
            heartbeat(connection, attempt: attempt)
        }
    }

    private func startListening(attempt: Int) {
        let eventLoop = eventLoopGroup.next()
        let logger = self.logger
        let connect = PostgresConnection.connect(
            on: eventLoop, configuration: configuration.connectionConfiguration, id: attempt, logger: logger)
        let timeout = configuration.connectTimeout + configuration.queryTimeout
        let scheduled = eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout * 1e9))) { [weak self] in
            self?.listenFailed(attempt: attempt, connection: nil)
        }
        connect.flatMap { [weak self] connection -> EventLoopFuture<PostgresConnection> in
            let fleet = self
            for channel in Self.channels {
                connection.addListener(channel: channel) { [weak fleet] _, notification in
                    fleet?.broadcast(.notification(channel: channel, payload: notification.payload))
                }
            }
            // The listeners' LISTEN commands run before this query on the same connection: once it answers,
            // every change committed from now on is heard.
            return connection.query("SELECT 1", logger: logger).map { _ in connection }.flatMapError { error in
                connection.close().flatMapThrowing { throw error }.flatMapErrorThrowing { _ in throw error }
            }
        }.whenComplete { [weak self] result in
            scheduled.cancel()
            switch result {
            case let .success(connection):
                guard let self else {
                    connection.close().whenComplete { _ in }
                    return
                }
                self.listenEstablished(attempt: attempt, connection: connection)
            case let .failure(error):
                self?.state.withLockedValue { $0.lastError = PostgresFleetError.from(error, operation: "listening for changes") }
                self?.listenFailed(attempt: attempt, connection: nil)
            }
        }
    }

    private func listenEstablished(attempt: Int, connection: PostgresConnection) {
        let epoch: Int? = state.withLockedValue { state in
            guard case let .connecting(current) = state.listen, current == attempt, !state.isShutDown else { return nil }
            state.listen = .listening(attempt: attempt, connection: connection, heartbeatInFlight: false, lastHeartbeat: Self.now())
            state.listenEpoch += 1
            state.listenConnections += 1
            return state.listenEpoch
        }
        guard let epoch else {
            connection.close().whenComplete { _ in }
            return
        }
        connection.closeFuture.whenComplete { [weak self] _ in
            self?.listenFailed(attempt: attempt, connection: connection)
        }
        broadcast(.listening(epoch: epoch))
    }

    /// The notification connection of `attempt` failed or closed: back to idle (retry after the backoff), and
    /// tell the observers when it had been listening.
    private func listenFailed(attempt: Int, connection: PostgresConnection?) {
        let now = Self.now()
        let (lost, epoch, toClose): (Bool, Int, PostgresConnection?) = state.withLockedValue { state in
            switch state.listen {
            case let .connecting(current) where current == attempt:
                state.listen = .idle(retryAt: now + Self.nanoseconds(configuration.reconnectInterval))
                return (false, state.listenEpoch, nil)
            case let .listening(current, open, _, _) where current == attempt:
                state.listen = .idle(retryAt: now + Self.nanoseconds(configuration.reconnectInterval))
                state.listenEpoch += 1
                state.lostAt = now
                return (true, state.listenEpoch, open)
            default:
                return (false, state.listenEpoch, nil)
            }
        }
        if let toClose, !toClose.isClosed { toClose.close().whenComplete { _ in } }
        if lost { broadcast(.notListening(epoch: epoch, at: now)) }
    }

    private func heartbeat(_ connection: PostgresConnection, attempt: Int) {
        let future = connection.query("SELECT 1", logger: logger)
        let timeout = configuration.queryTimeout
        let scheduled = connection.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout * 1e9))) { [weak self] in
            self?.state.withLockedValue { $0.lastError = .timedOut(operation: "heartbeat", seconds: timeout) }
            self?.listenFailed(attempt: attempt, connection: connection)
        }
        future.whenComplete { [weak self] result in
            scheduled.cancel()
            guard let self else { return }
            switch result {
            case .success:
                self.state.withLockedValue { state in
                    if case let .listening(current, open, _, _) = state.listen, current == attempt {
                        state.listen = .listening(attempt: current, connection: open, heartbeatInFlight: false, lastHeartbeat: Self.now())
                    }
                }
            case .failure:
                self.listenFailed(attempt: attempt, connection: connection)
            }
        }
    }

    // MARK: Time and waiting

    /// Monotonic nanoseconds.
    static func now() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds
    }

    static func nanoseconds(_ seconds: TimeInterval) -> UInt64 {
        UInt64(max(seconds, 0) * 1e9)
    }

    /// The value of `future`, awaited (never blocking a thread) until `deadline`: then
    /// ``PostgresFleetError/timedOut(operation:seconds:)``, whatever the future does later. A cancelled caller
    /// gets ``PostgresFleetError/unavailable(reason:)`` at once.
    static func value<Value: Sendable>(
        of future: EventLoopFuture<Value>, by deadline: ContinuousClock.Instant, operation: String
    ) async throws(PostgresFleetError) -> Value {
        let budget = ContinuousClock.now.duration(to: deadline)
        let seconds = Double(budget.components.seconds) + Double(budget.components.attoseconds) / 1e18
        let once = OnceResult<Value>()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, PostgresFleetError>, Never>) in
                once.install(continuation)
                let timer = future.eventLoop.scheduleTask(deadline: .now() + .nanoseconds(max(Int64(seconds * 1e9), 0))) {
                    once.resume(.failure(.timedOut(operation: operation, seconds: (seconds * 1000).rounded() / 1000)))
                }
                future.whenComplete { result in
                    timer.cancel()
                    once.resume(result.mapError { PostgresFleetError.from($0, operation: operation) })
                }
            }
        } onCancel: {
            once.resume(.failure(.unavailable(reason: "\(operation): the calling task was cancelled")))
        }
        return try result.get()
    }
}

/// A continuation resumed once, by the first of several parties (the answer, a timer, a cancellation); a
/// party that comes before the continuation is installed leaves its result for the installation.
private final class OnceResult<Value: Sendable>: Sendable {
    private enum Slot {
        case empty
        case waiting(CheckedContinuation<Result<Value, PostgresFleetError>, Never>)
        case early(Result<Value, PostgresFleetError>)
        case done
    }

    private let slot = NIOLockedValueBox<Slot>(.empty)

    func install(_ continuation: CheckedContinuation<Result<Value, PostgresFleetError>, Never>) {
        let early: Result<Value, PostgresFleetError>? = slot.withLockedValue { slot in
            if case let .early(result) = slot {
                slot = .done
                return result
            }
            slot = .waiting(continuation)
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(_ result: Result<Value, PostgresFleetError>) {
        let continuation: CheckedContinuation<Result<Value, PostgresFleetError>, Never>? = slot.withLockedValue { slot in
            switch slot {
            case .empty:
                slot = .early(result)
                return nil
            case let .waiting(continuation):
                slot = .done
                return continuation
            case .early, .done:
                return nil
            }
        }
        continuation?.resume(returning: result)
    }
}

/// The maintenance timer. Safety: a dispatch source is thread-safe; it is resumed once and cancelled.
struct DispatchSourceTimerBox: @unchecked Sendable {
    let source: any DispatchSourceTimer

    init(_ source: any DispatchSourceTimer) {
        self.source = source
    }
}
