import Dispatch
import Foundation
import Testing
@testable import IdentityRuntime

/// Every submission path of ``IdentityDispatchQueue`` (the block-free one of the global queues, the overlay's
/// block for every other queue, the wrapped unit of strict mode and faults), every quality of service.
@Suite("Dispatch paths: every QoS and queue kind attributes units and leaves workers clean")
struct DispatchPathAttackTests {
    static let classes: [DispatchQoS.QoSClass] = [
        .background, .utility, .default, .userInitiated, .userInteractive, .unspecified,
    ]

    /// What a unit saw at entry, and after changing its own identity with the unscoped setter.
    struct Seen: Sendable, Equatable {
        let atEntry: Identity?
        let afterSet: Identity?
    }

    /// Submits `count` units under `identity` that each observe, then change, the thread identity.
    func units(on queue: IdentityDispatchQueue, under identity: Identity?, count: Int = 8) async -> [Seen] {
        await collect(count) { report in
            IdentityContext.withThreadIdentity(identity) {
                for _ in 0..<count {
                    queue.async {
                        let atEntry = current
                        IdentityContext.setCurrentThreadIdentity(Accounts.carol)
                        report(Seen(atEntry: atEntry, afterSet: current))
                    }
                }
            }
        }
    }

    /// Raw blocks on `queue`'s threads: what a block that carries nothing observes there.
    func rawProbes(on queue: DispatchQueue, count: Int = 16) async -> [Identity?] {
        await collect(count) { report in
            for _ in 0..<count { queue.async { report(current) } }
        }
    }

    @Test("every global QoS class runs each unit under its submitter's identity and leaves the worker clean",
          arguments: classes)
    func globalQueuesAttributeAndClean(qos: DispatchQoS.QoSClass) async {
        let queue = IdentityDispatchQueue.global(qos: qos)
        for identity in [Accounts.alice, nil] {
            let seen = await units(on: queue, under: identity)
            #expect(seen.allSatisfy { $0 == Seen(atEntry: identity, afterSet: Accounts.carol) })
        }
        #expect(await rawProbes(on: .global(qos: qos)).allSatisfy { $0 == nil })
    }

    @Test("a global wrapper runs on the queue DispatchQueue.global(qos:) names", arguments: classes)
    func globalWrapperIsTheGlobalQueue(qos: DispatchQoS.QoSClass) async {
        let queue = IdentityDispatchQueue.global(qos: qos)
        #expect(queue.label == DispatchQueue.global(qos: qos).label)
        // libdispatch stops the process if the block runs anywhere else.
        let ran: Bool = await observe { report in
            queue.async {
                dispatchPrecondition(condition: .onQueue(.global(qos: qos)))
                report(true)
            }
        }
        #expect(ran)
    }

    @Test("queues wrapped or created with target, attributes and QoS attribute units and leave workers clean")
    func wrappedAndCreatedQueues() async {
        let inactive = DispatchQueue(label: "attack-inactive", attributes: [.concurrent, .initiallyInactive])
        let queues: [IdentityDispatchQueue] = [
            IdentityDispatchQueue(wrapping: .global(qos: .utility)),
            IdentityDispatchQueue(wrapping: .global(qos: .userInteractive)),
            IdentityDispatchQueue(wrapping: DispatchQueue(label: "attack-serial")),
            IdentityDispatchQueue(label: "attack-concurrent", attributes: .concurrent),
            IdentityDispatchQueue(label: "attack-target", target: .global(qos: .background)),
            IdentityDispatchQueue(label: "attack-qos", qos: .userInteractive, attributes: .concurrent),
            IdentityDispatchQueue(
                label: "attack-target-wrapper",
                target: IdentityDispatchQueue.global(qos: .userInitiated).underlying),
            IdentityDispatchQueue(label: "attack-never", autoreleaseFrequency: .never),
            IdentityDispatchQueue(wrapping: inactive),
        ]
        inactive.activate()
        for queue in queues {
            let seen = await units(on: queue, under: Accounts.bob, count: 4)
            #expect(seen.allSatisfy { $0 == Seen(atEntry: Accounts.bob, afterSet: Accounts.carol) }, "\(queue.label)")
            #expect(await rawProbes(on: queue.underlying, count: 4).allSatisfy { $0 == nil }, "\(queue.label)")
        }
    }

    @Test("barrier, group, QoS, asyncAfter and work items on global queues attribute and leave workers clean",
          arguments: classes)
    func everyFormOnGlobalQueues(qos: DispatchQoS.QoSClass) async {
        let queue = IdentityDispatchQueue.global(qos: qos)
        let group = DispatchGroup()
        let seen: [Identity?] = await collect(6) { report in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                queue.async(flags: .barrier) { report(current); IdentityContext.setCurrentThreadIdentity(nil) }
                queue.async(group: group) { report(current); IdentityContext.setCurrentThreadIdentity(nil) }
                queue.async(qos: .userInitiated) { report(current); IdentityContext.setCurrentThreadIdentity(nil) }
                queue.asyncAfter(deadline: .now()) { report(current); IdentityContext.setCurrentThreadIdentity(nil) }
                queue.asyncAfter(wallDeadline: .now()) { report(current); IdentityContext.setCurrentThreadIdentity(nil) }
                queue.async(execute: IdentityWorkItem { report(current); IdentityContext.setCurrentThreadIdentity(nil) })
            }
        }
        #expect(seen == Array(repeating: Accounts.alice, count: 6))
        let flowed: [Identity?] = await collect(2) { report in
            IdentityContext.withThreadIdentity(Accounts.alice) {
                queue.async(flow: .suppress) { report(current) }
                queue.async(flow: .assign(Accounts.bob)) { report(current) }
            }
        }
        #expect(Set(flowed) == [nil, Accounts.bob])
        #expect(await rawProbes(on: .global(qos: qos)).allSatisfy { $0 == nil })
    }

    @Test("strict mode and an injected fault reach the block-free global path", arguments: classes)
    func strictModeReachesGlobalPath(qos: DispatchQoS.QoSClass) async {
        let queue = IdentityDispatchQueue.global(qos: qos)
        let line: UInt = #line + 6
        let (observed, issues): ([Identity?], [RuntimeIssue]) = await capturingRuntimeIssues(kinds: ["misattributed"]) {
            await collect(1) { report in
                IdentityStrictMode.checking {
                    FaultInjection.inject(.captureAtRun) {
                        IdentityContext.withThreadIdentity(Accounts.alice) {
                            queue.async { report(current) }
                        }
                    }
                }
            }
        }
        #expect(observed == [nil])
        #expect(issues.contains(.misattributed(
            site: SubmitSite(fileID: "IdentityRuntimeTests/DispatchPathAttackTests.swift", line: line),
            expected: Accounts.alice, observed: nil)))
    }

    @Test("sync on every global queue runs under the caller's identity and restores it, on return and throw",
          arguments: classes)
    func syncOnGlobalQueues(qos: DispatchQoS.QoSClass) {
        let queue = IdentityDispatchQueue.global(qos: qos)
        IdentityContext.withThreadIdentity(Accounts.alice) {
            let inside = queue.sync { () -> Identity? in
                let seen = current
                IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                return seen
            }
            #expect(inside == Accounts.alice)
            #expect(current == Accounts.alice)
            #expect(throws: Boom.self) {
                try queue.sync(flags: .barrier) { () throws(Boom) in
                    IdentityContext.setCurrentThreadIdentity(Accounts.bob)
                    throw Boom()
                }
            }
            #expect(current == Accounts.alice)
            #expect(throws: Boom.self) {
                try queue.asyncAndWait(flow: .suppress) { () throws(Boom) in
                    #expect(current == nil)
                    throw Boom()
                }
            }
            #expect(current == Accounts.alice)
        }
    }
}
