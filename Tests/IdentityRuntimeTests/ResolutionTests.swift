import Foundation
import IdentityTesting
import Testing
@testable import IdentityRuntime

/// Levels and effective identities (article IdentitiesAndPropagation). These tests change process-wide levels, so they run one at a time and reset afterwards; no
/// other suite reads the process or UI identity.
@Suite("Levels and effective identities", .serialized, .exclusiveProcessIdentity)
struct ResolutionTests {
    init() { IdentityContext.resetAllLevels() }

    @Test("no level set: every effective identity is nil")
    func nothingSet() async {
        await onRawThread { () -> Bool in
            IdentityContext.effectiveFileIdentity == nil && IdentityContext.effectiveUIIdentity == nil
        }.check()
        await MainActor.run {
            #expect(IdentityContext.effectiveUIIdentity == nil)
            #expect(IdentityContext.effectiveFileIdentity == nil)
        }
        IdentityContext.resetAllLevels()
    }

    @Test("file identity: thread, else process; the UI identity never takes part", arguments: Accounts.submitters)
    func fileIdentity(thread: Identity?) async {
        IdentityContext.processIdentity = Accounts.bob
        IdentityContext.setUIPolicyIdentity(Accounts.carol)
        await MainActor.run {
            IdentityContext.withThreadIdentity(thread) {
                #expect(IdentityContext.effectiveFileIdentity == (thread ?? Accounts.bob))
            }
        }
        let background = await onRawThread {
            IdentityContext.withThreadIdentity(thread) { IdentityContext.effectiveFileIdentity }
        }
        #expect(background == (thread ?? Accounts.bob))
        IdentityContext.processIdentity = nil
        let noProcess = await onRawThread { IdentityContext.withThreadIdentity(thread) { IdentityContext.effectiveFileIdentity } }
        #expect(noProcess == thread)
        IdentityContext.resetAllLevels()
    }

    @Test("UI identity applies on the main thread only, between thread and process")
    func uiIdentityMainThreadOnly() async {
        IdentityContext.processIdentity = Accounts.bob
        IdentityContext.setUIPolicyIdentity(Accounts.carol)
        await MainActor.run {
            #expect(MainThread.isCurrent)
            #expect(IdentityContext.effectiveUIIdentity == Accounts.carol)
            IdentityContext.withThreadIdentity(Accounts.alice) {
                #expect(IdentityContext.effectiveUIIdentity == Accounts.alice)
            }
            IdentityContext.withThreadIdentity(.unmanaged) {
                #expect(IdentityContext.effectiveUIIdentity == .unmanaged)
            }
        }
        let background = await onRawThread { IdentityContext.effectiveUIIdentity }
        #expect(background == Accounts.bob)
        let mainQueue = await observe { report in
            IdentityDispatchQueue.main.async { report(IdentityContext.effectiveUIIdentity) }
        }
        #expect(mainQueue == Accounts.carol)
        let mainQueueWithThread = await observe { report in
            IdentityDispatchQueue.main.async(flow: .assign(Accounts.alice)) { report(IdentityContext.effectiveUIIdentity) }
        }
        #expect(mainQueueWithThread == Accounts.alice)
        let globalQueue = await observe { report in
            IdentityDispatchQueue.global().async { report(IdentityContext.effectiveUIIdentity) }
        }
        #expect(globalQueue == Accounts.bob)
        IdentityContext.resetAllLevels()
    }

    @Test("unmanaged is a value that stops the fall-through at every level")
    func unmanagedStopsFallThrough() async {
        IdentityContext.processIdentity = Accounts.bob
        IdentityContext.setUIPolicyIdentity(.unmanaged)
        await MainActor.run {
            #expect(IdentityContext.effectiveUIIdentity == .unmanaged)
        }
        IdentityContext.setUIPolicyIdentity(nil)
        await MainActor.run {
            #expect(IdentityContext.effectiveUIIdentity == Accounts.bob)
        }
        IdentityContext.processIdentity = .unmanaged
        let file = await onRawThread { IdentityContext.effectiveFileIdentity }
        #expect(file == .unmanaged)
        IdentityContext.resetAllLevels()
    }

    @Test("UI identity is per window; nil means the key window")
    func perWindow() async {
        let work = WindowID("work")
        let personal = WindowID("personal")
        IdentityContext.setUIPolicyIdentity(Accounts.alice, for: work)
        IdentityContext.setUIPolicyIdentity(.unmanaged, for: personal)
        IdentityContext.processIdentity = Accounts.bob
        #expect(IdentityContext.uiPolicyIdentity(for: work) == Accounts.alice)
        #expect(IdentityContext.uiPolicyIdentity(for: personal) == .unmanaged)
        #expect(IdentityContext.uiPolicyIdentity(for: .main) == nil)
        #expect(IdentityContext.uiPolicyIdentity() == nil)
        await MainActor.run {
            #expect(IdentityContext.effectiveUIIdentity(for: work) == Accounts.alice)
            #expect(IdentityContext.effectiveUIIdentity(for: personal) == .unmanaged)
            #expect(IdentityContext.effectiveUIIdentity(for: .main) == Accounts.bob)
            #expect(IdentityContext.effectiveUIIdentity == Accounts.bob)
            IdentityContext.keyWindow = work
            #expect(IdentityContext.effectiveUIIdentity == Accounts.alice)
            #expect(IdentityContext.uiPolicyIdentity() == Accounts.alice)
            IdentityContext.keyWindow = personal
            #expect(IdentityContext.effectiveUIIdentity == .unmanaged)
            IdentityContext.setUIPolicyIdentity(Accounts.carol)
            #expect(IdentityContext.uiPolicyIdentity(for: personal) == Accounts.carol)
        }
        IdentityContext.resetAllLevels()
        #expect(IdentityContext.keyWindow == .main)
    }

    @Test("process identity keeps the spelling it was set with, and nil clears it, however often it is set")
    func processIdentitySpelling() {
        IdentityContext.processIdentity = Identity("Alice@Contoso.com")
        #expect(IdentityContext.processIdentity?.name == "Alice@Contoso.com")
        IdentityContext.processIdentity = Identity("ALICE@CONTOSO.COM")
        #expect(IdentityContext.processIdentity?.name == "ALICE@CONTOSO.COM")
        for round in 0..<1_000 {
            IdentityContext.processIdentity = round.isMultiple(of: 2) ? Accounts.alice : nil
        }
        #expect(IdentityContext.processIdentity == nil)
        IdentityContext.processIdentity = .unmanaged
        #expect(IdentityContext.processIdentity == .unmanaged)
        #expect(IdentityContext.effectiveFileIdentity == .unmanaged)
        IdentityContext.resetAllLevels()
    }

    @Test("process identity is thread-safe under concurrent writers and readers")
    func processIdentityConcurrent() async {
        let accounts = Accounts.many(8)
        await withTaskGroup(of: Void.self) { group in
            for account in accounts {
                group.addTask {
                    for _ in 0..<2_000 {
                        IdentityContext.processIdentity = account
                        let read = IdentityContext.processIdentity
                        #expect(read.map(accounts.contains) == true)
                    }
                }
            }
        }
        #expect(IdentityContext.processIdentity.map(accounts.contains) == true)
        IdentityContext.resetAllLevels()
    }

    @Test("tasks calling the unscoped setter while the synchronous scope they came from ends are refused")
    func unscopedSetterInTaskRacingScopeEnd() async {
        let marker: Identity = "racing-unscoped-setter@contoso.com"
        let count = 200
        let (observed, issues) = await capturingRuntimeIssues(kinds: ["unscopedChangeInTask"]) {
            var tasks: [Task<Identity?, Never>] = []
            for _ in 0..<count {
                // The task reads the scope's frame on another thread while this thread ends the scope.
                IdentityContext.withThreadIdentity(Accounts.alice) {
                    tasks.append(Task {
                        setUnscopedFromSynchronousCode(marker)
                        return current
                    })
                }
            }
            var observed: [Identity?] = []
            for task in tasks { observed.append(await task.value) }
            return observed
        }
        #expect(observed == Array(repeating: Accounts.alice, count: count))
        #expect(issues.filter { $0 == .unscopedChangeInTask(marker) }.count == count)
    }

    @Test("the unscoped setter inside a task changes nothing and reports why")
    func unscopedSetterRefusedInTask() async {
        let (observed, issues) = await capturingRuntimeIssues(kinds: ["unscopedChangeInTask"]) {
            await IdentityContext.withThreadIdentity(Accounts.alice) { () async -> Identity? in
                setUnscopedFromSynchronousCode(Accounts.bob)
                return current
            }
        }
        #expect(observed == Accounts.alice)
        #expect(issues == [.unscopedChangeInTask(Accounts.bob)])
        let (bare, bareIssues) = await capturingRuntimeIssues(kinds: ["unscopedChangeInTask"]) {
            setUnscopedFromSynchronousCode(Accounts.bob)
            return current
        }
        #expect(bare == nil)
        #expect(bareIssues == [.unscopedChangeInTask(Accounts.bob)])
        #expect(RuntimeIssue.unscopedChangeInTask(nil).description.contains("withThreadIdentity"))
        // A synchronous scope inside a task is a scope of its own: the change lasts until it ends.
        let (inSyncScope, syncIssues) = await capturingRuntimeIssues(kinds: ["unscopedChangeInTask"]) {
            let inside = IdentityContext.withThreadIdentity(Accounts.alice) {
                setUnscopedFromSynchronousCode(Accounts.bob)
                return current
            }
            return [inside, current]
        }
        #expect(inSyncScope == [Accounts.bob, nil])
        #expect(syncIssues.isEmpty)
    }
}

/// Synchronous code that calls the `noasync` setter; called from a task to show what happens there.
func setUnscopedFromSynchronousCode(_ identity: Identity?) {
    IdentityContext.setCurrentThreadIdentity(identity)
}

extension Bool {
    func check(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(self, sourceLocation: sourceLocation)
    }
}
