import Dispatch
import Foundation
import Testing
@testable import IdentityRuntime

/// Mixed chains: each hop hands the work on through a different mechanism, and every hop checks the
/// identity it observes. queue → operation → Task → task group → queue → work item → ...
@Suite("Mixed chains at depth ≥ 10")
struct ChainTests {
    enum Hop: CaseIterable, Sendable {
        case queue, operation, task, taskGroup, workItem, syncQueue, barrier, snapshotThread
    }

    static let queue = IdentityDispatchQueue(label: "chain", attributes: .concurrent)
    static let operations = IdentityOperationQueue()
    /// `sync` hops use their own queue: a barrier block calling `sync` on its own queue would deadlock.
    static let syncTarget = IdentityDispatchQueue(label: "chain.sync")

    /// Runs `hops` in order starting from the current context; returns what each hop observed.
    static func run(_ hops: ArraySlice<Hop>, seen: [Identity?], done: @escaping @Sendable ([Identity?]) -> Void) {
        guard let hop = hops.first else { return done(seen) }
        let rest = hops.dropFirst()
        let next: @Sendable () -> Void = { run(rest, seen: seen + [current], done: done) }
        switch hop {
        case .queue:
            queue.async(execute: next)
        case .operation:
            operations.addOperation(next)
        case .task:
            Task { next() }
        case .taskGroup:
            Task {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { next() }
                }
            }
        case .workItem:
            let item = IdentityWorkItem(block: next)
            IdentityContext.withThreadIdentity(Accounts.carol) { queue.async(execute: item) }
        case .syncQueue:
            syncTarget.sync { next() }
        case .barrier:
            queue.async(flags: .barrier, execute: next)
        case .snapshotThread:
            let snapshot = IdentitySnapshot.capture()
            Thread { snapshot.run(next) }.start()
        }
    }

    static let chains: [[Hop]] = [
        [.queue, .operation, .task, .taskGroup, .queue, .workItem, .operation, .task, .syncQueue, .barrier, .taskGroup, .snapshotThread],
        Array(Hop.allCases + Hop.allCases.reversed()),
        (0..<24).map { Hop.allCases[($0 * 5) % Hop.allCases.count] },
    ]

    @Test("every hop of a mixed chain observes the chain's identity",
          arguments: chains.indices, Accounts.submitters)
    func chain(index: Int, identity: Identity?) async {
        let hops = Self.chains[index]
        #expect(hops.count >= 10)
        let seen: [Identity?] = await observe { report in
            IdentityContext.withThreadIdentity(identity) {
                Self.run(hops[...], seen: [], done: report)
            }
        }
        #expect(seen.count == hops.count)
        #expect(seen.allSatisfy { $0 == identity })
    }

    @Test("many chains of different identities interleave without crossing")
    func interleavedChains() async {
        let accounts = Accounts.many(16)
        let hops = Self.chains[0][...]
        let results: [(Identity, [Identity?])] = await withTaskGroup(of: (Identity, [Identity?]).self) { group in
            for account in accounts {
                group.addTask {
                    let seen: [Identity?] = await observe { report in
                        IdentityContext.withThreadIdentity(account) { Self.run(hops, seen: [], done: report) }
                    }
                    return (account, seen)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == accounts.count)
        for (account, seen) in results {
            #expect(seen.count == hops.count)
            #expect(seen.allSatisfy { $0 == account }, "chain of \(account)")
        }
    }
}
