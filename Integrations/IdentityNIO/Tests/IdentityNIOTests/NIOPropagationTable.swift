import IdentityNIO
import IdentityRuntime
import IdentityTesting
import NIOCore
import NIOPosix

/// The package's propagation table (README.md), row by row, as live checks on a `MultiThreadedEventLoopGroup`.
enum NIOPropagationTable {
    static let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    static var loop: any EventLoop { group.next() }

    /// A second account: the completer, or the identity a row must show loses.
    static let other: Identity = "bob@fabrikam.com"

    static var current: Identity? { IdentityContext.currentThreadIdentity }

    typealias Report = PropagationCheck.Report

    /// Every row.
    static let checks: [PropagationCheck] = loopChecks + futureChecks + taskChecks

    // MARK: EventLoop

    static let loopChecks: [PropagationCheck] = [
        .notCarried("EventLoop.execute (raw)") { report in loop.execute { report(current) } },
        .notCarried("EventLoop.scheduleTask(in:) (raw)") { report in
            loop.scheduleTask(in: .milliseconds(1)) { report(current) }
        },
        .inheriting("EventLoop.execute(flow: .inherit)", at: "the call") { report in
            loop.execute(flow: .inherit) { report(current) }
        },
        .inheriting("EventLoop.submit(flow: .inherit), flatSubmit(flow: .inherit)", at: "the call", count: 2) { report in
            let target = loop
            _ = target.submit(flow: .inherit) { report(current) }
            _ = target.flatSubmit(flow: .inherit) { () -> EventLoopFuture<Void> in
                report(current)
                return target.makeSucceededVoidFuture()
            }
        },
        .inheriting("EventLoop.scheduleTask(deadline:/in: flow: .inherit), flatScheduleTask", at: "the call", count: 3) { report in
            let target = loop
            target.scheduleTask(deadline: .now() + .milliseconds(1), flow: .inherit) { report(current) }
            target.scheduleTask(in: .milliseconds(1), flow: .inherit) { report(current) }
            target.flatScheduleTask(in: .milliseconds(1), flow: .inherit) { () -> EventLoopFuture<Void> in
                report(current)
                return target.makeSucceededVoidFuture()
            }
        },
        PropagationCheck(
            mechanism: "EventLoop.execute / submit / scheduleTask with flow: .suppress", captured: "—",
            expected: { _ in nil },
            observe: { submitter in
                await collectReports(3) { report in
                    IdentityContext.withThreadIdentity(submitter) {
                        loop.execute(flow: .suppress) { report(current) }
                        _ = loop.submit(flow: .suppress) { report(current) }
                        loop.scheduleTask(in: .milliseconds(1), flow: .suppress) { report(current) }
                    }
                }
            }),
        PropagationCheck(
            mechanism: "EventLoop.execute / submit / scheduleTask with flow: .assign(x)", captured: "—",
            expected: { _ in other },
            observe: { submitter in
                await collectReports(3) { report in
                    IdentityContext.withThreadIdentity(submitter) {
                        loop.execute(flow: .assign(other)) { report(current) }
                        _ = loop.submit(flow: .assign(other)) { report(current) }
                        loop.scheduleTask(in: .milliseconds(1), flow: .assign(other)) { report(current) }
                    }
                }
            }),
    ]

    // MARK: EventLoopFuture

    static let futureChecks: [PropagationCheck] = [
        PropagationCheck(
            mechanism: "future callbacks (raw map, whenComplete): the completer's identity, not the registrar's",
            captured: "nothing", expected: { _ in other },
            observe: { registrar in
                await collectReports(2) { report in
                    let promise = loop.makePromise(of: Int.self)
                    IdentityContext.withThreadIdentity(registrar) {
                        promise.futureResult.map { _ in report(current) }.whenComplete { _ in report(current) }
                    }
                    promise.futureResult.eventLoop.execute(flow: .assign(other)) { promise.succeed(1) }
                }
            }),
        registered("map, flatMap, flatMapThrowing (flow: .inherit)", count: 3, succeeds: true) { future, report in
            future.map(flow: .inherit) { _ in report(current) }
                .flatMap(flow: .inherit) { _ -> EventLoopFuture<Int> in
                    report(current)
                    return future.eventLoop.makeSucceededFuture(2)
                }
                .flatMapThrowing(flow: .inherit) { _ in report(current) }
                .whenComplete { _ in }
        },
        registered("whenSuccess, whenComplete, always (flow: .inherit)", count: 3, succeeds: true) { future, report in
            future.whenSuccess(flow: .inherit) { _ in report(current) }
            future.whenComplete(flow: .inherit) { _ in report(current) }
            _ = future.always(flow: .inherit) { _ in report(current) }
        },
        registered(
            "whenFailure, flatMapError, flatMapErrorThrowing, recover (flow: .inherit)", count: 4, succeeds: false
        ) { future, report in
            future.whenFailure(flow: .inherit) { _ in report(current) }
            _ = future.flatMapError(flow: .inherit) { error -> EventLoopFuture<Int> in
                report(current)
                return future.eventLoop.makeFailedFuture(error)
            }
            _ = future.flatMapErrorThrowing(flow: .inherit) { error -> Int in
                report(current)
                throw error
            }
            _ = future.recover(flow: .inherit) { _ in
                report(current)
                return 0
            }
        },
    ]

    /// A row whose callbacks are registered under the submitter's identity on a promise that code of
    /// ``other`` completes on the loop: they must observe the registrar's.
    static func registered(
        _ mechanism: String, count: Int, succeeds: Bool,
        _ register: @escaping @Sendable (EventLoopFuture<Int>, @escaping Report) -> Void
    ) -> PropagationCheck {
        PropagationCheck(mechanism: mechanism, captured: "registration", expected: { $0 }) { registrar in
            await collectReports(count) { report in
                let promise = loop.makePromise(of: Int.self)
                IdentityContext.withThreadIdentity(registrar) { register(promise.futureResult, report) }
                promise.futureResult.eventLoop.execute(flow: .assign(other)) {
                    if succeeds { promise.succeed(1) } else { promise.fail(ChannelError.ioOnClosedChannel) }
                }
            }
        }
    }

    // MARK: Swift concurrency

    static let taskChecks: [PropagationCheck] = [
        .inheriting("EventLoopPromise.completeWithTask (raw: a Task {})", at: "the call") { report in
            _ = loop.makePromise(of: Void.self).completeWithTask { report(current) }
        },
        .inheriting("EventLoopPromise.completeWithTask(flow: .inherit)", at: "the call") { report in
            _ = loop.makePromise(of: Void.self).completeWithTask(flow: .inherit) { report(current) }
        },
        PropagationCheck(
            mechanism: "EventLoopPromise.completeWithTask(flow: .suppress)", captured: "—", expected: { _ in nil },
            observe: { submitter in
                await collectReports(1) { report in
                    IdentityContext.withThreadIdentity(submitter) {
                        _ = loop.makePromise(of: Void.self).completeWithTask(flow: .suppress) { report(current) }
                    }
                }
            }),
        PropagationCheck(
            mechanism: "await future.get() in a task: the awaiting task's own identity", captured: "task creation",
            expected: { $0 },
            observe: { awaiter in
                await IdentityContext.withThreadIdentity(awaiter) {
                    let future = loop.submit(flow: .assign(other)) { 1 }
                    _ = try? await future.get()
                    return [current]
                }
            }),
    ]
}
