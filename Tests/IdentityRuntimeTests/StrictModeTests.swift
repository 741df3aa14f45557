import Dispatch
import Foundation
import Testing
@testable import IdentityRuntime

/// Strict mode and deliberately broken wrappers. Checks and faults are scoped to the units each test
/// submits (`IdentityStrictMode.checking`, `FaultInjection.inject`), so suites running in parallel are
/// unaffected; reports are told apart by their submit site in this file.
@Suite("Strict mode: submit sites, entry/exit checks, exactly-once, and injected faults are caught", .serialized)
struct StrictModeTests {
    static let file = "IdentityRuntimeTests/StrictModeTests.swift"

    /// Reports whose site is in this file, collected while `body` runs and until `settle` passes.
    func reports(_ body: () async -> Void) async -> [RuntimeIssue] {
        let kinds: Set<String> = ["misattributed", "identityLeaked", "unitNeverRan", "unitRanTwice"]
        let (_, issues) = await IdentityStrictMode.capturingIssues(
            matching: { kinds.contains($0.kind) && $0.site?.fileID.description == Self.file }
        ) {
            await body()
        }
        return issues
    }

    let queue = IdentityDispatchQueue(label: "strict", attributes: .concurrent)

    @Test("correct units under strict mode produce no report")
    func cleanRun() async {
        let issues = await reports {
            let _: [Identity?] = await collect(4) { report in
                IdentityStrictMode.checking {
                    IdentityContext.withThreadIdentity(Accounts.alice) {
                        queue.async { report(current) }
                        queue.asyncAfter(deadline: .now() + .milliseconds(1)) { report(current) }
                        IdentityOperationQueue().addOperation(flow: .inherit) { report(current) }
                        let item = IdentityWorkItem { report(current) }
                        queue.async(execute: item)
                    }
                }
            }
        }
        #expect(issues.isEmpty)
    }

    @Test("a wrapper that captures at run time is caught: misattributed, with the submit site")
    func captureAtRunIsCaught() async {
        let expectedLine: UInt = #line + 8
        let (observed, issues): ([Identity?], [RuntimeIssue]) = await {
            var observed: [Identity?] = []
            let issues = await reports {
                observed = await collect(2) { report in
                    IdentityStrictMode.checking {
                        FaultInjection.inject(.captureAtRun) {
                            IdentityContext.withThreadIdentity(Accounts.alice) {
                                queue.async { report(current) }
                                IdentityOperationQueue().addOperation(flow: .inherit) { report(current) }
                            }
                        }
                    }
                }
            }
            return (observed, issues)
        }()
        #expect(observed.allSatisfy { $0 == nil })
        #expect(issues.count == 2)
        #expect(issues.contains(.misattributed(
            site: SubmitSite(fileID: "IdentityRuntimeTests/StrictModeTests.swift", line: expectedLine),
            expected: Accounts.alice, observed: nil)))
    }

    @Test("a wrapper that skips the restore is caught by the exit check and by a raw probe on the worker")
    func skipRestoreIsCaught() async {
        // Units run on a thread of our own, so the injected leak never reaches the shared worker pool.
        let unit = IdentityStrictMode.checking {
            FaultInjection.inject(.skipRestore) {
                IdentitySnapshot(identity: Accounts.bob).prepare(site: SubmitSite()) {}
            }
        }
        var leftOnWorker: Identity?
        let issues = await reports {
            leftOnWorker = await onRawThread {
                unit.run()
                let left = current
                IdentityContext.setCurrentThreadIdentity(nil)
                return left
            }
        }
        #expect(leftOnWorker == Accounts.bob)
        #expect(issues.count == 1)
        if case let .identityLeaked(_, before, after) = issues.first {
            #expect(before == nil)
            #expect(after == Accounts.bob)
        } else {
            Issue.record("expected identityLeaked, got \(issues)")
        }
    }

    @Test("a work item released without running is reported; a cancelled one is not")
    func droppedWorkItem() async {
        let issues = await reports {
            IdentityStrictMode.checking {
                _ = IdentityWorkItem { }
                IdentityWorkItem { }.cancel()
            }
        }
        #expect(issues.count == 1)
        if case .unitNeverRan = issues.first {} else { Issue.record("expected unitNeverRan, got \(issues)") }
    }

    @Test("a block that must run once and runs twice is reported; work items may run again")
    func ranTwice() async {
        let issues = await reports {
            await onRawThread {
                IdentityStrictMode.checking {
                    let unit = IdentitySnapshot(identity: Accounts.alice).prepare(site: SubmitSite()) {}
                    unit.run()
                    unit.run()
                    let item = IdentityWorkItem { }
                    item.perform()
                    item.perform()
                }
            }
        }
        #expect(issues.count == 1)
        if case .unitRanTwice = issues.first {} else { Issue.record("expected unitRanTwice, got \(issues)") }
    }

    @Test("identities left by the unscoped setter outside any scope are reported on request")
    func unresetThreadIdentities() async {
        let marker: Identity = "strict-mode-unreset@contoso.com"
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        Thread {
            IdentityContext.setCurrentThreadIdentity(marker)
            holding.signal()
            release.wait()
            IdentityContext.setCurrentThreadIdentity(nil)
        }.start()
        holding.wait()
        let (_, issues) = await capturingRuntimeIssues(kinds: ["unscopedIdentityNotReset"]) {
            IdentityStrictMode.reportUnresetThreadIdentities()
        }
        release.signal()
        let ours = issues.filter {
            if case let .unscopedIdentityNotReset(_, identity) = $0 { return identity == marker }
            return false
        }
        #expect(ours.count == 1)
        #expect(ours.first?.description.contains("set it back to nil") == true)
    }

    @Test("issues describe themselves with their site")
    func descriptions() {
        let site = SubmitSite(fileID: "Module/File.swift", line: 12)
        #expect(site.description == "Module/File.swift:12")
        #expect(RuntimeIssue.unitNeverRan(site: site).description.contains("Module/File.swift:12"))
        #expect(RuntimeIssue.misattributed(site: site, expected: Accounts.alice, observed: nil).kind == "misattributed")
    }
}
