import Dispatch
import Foundation
import IdentityTesting
import Testing
@testable import IdentityRuntime

/// `IdentitySnapshot.makeUnit`: work prepared for executors the runtime does not wrap.
@Suite("IdentitySnapshot.makeUnit: runs under the snapshot, leaves the thread as found, checked by strict mode")
struct MakeUnitTests {
    static let file = "IdentityRuntimeTests/MakeUnitTests.swift"

    @Test("the unit observes the captured identity on a raw thread and leaves it with none",
          arguments: Accounts.submitters)
    func runsUnderSnapshot(identity: Identity?) async {
        let unit = IdentityContext.withThreadIdentity(identity) {
            IdentitySnapshot.capture().makeUnit {}
        }
        let seen: [Identity?] = await collect(2) { report in
            let observing = IdentityContext.withThreadIdentity(identity) {
                IdentitySnapshot.capture().makeUnit { report(current) }
            }
            Thread {
                unit()
                observing()
                report(current)
            }.start()
        }
        #expect(seen == [identity, nil])
    }

    @Test("strict mode: a unit called twice is reported with its site; a clean one is not")
    func strictModeChecksRuns() async {
        let expectedLine: UInt = #line + 4
        let (_, issues) = await capturingRuntimeIssues(kinds: ["unitRanTwice", "misattributed", "identityLeaked"]) {
            let (twice, once) = IdentityStrictMode.checking {
                IdentityContext.withThreadIdentity(Accounts.alice) {
                    (IdentitySnapshot.capture().makeUnit {},
                     IdentitySnapshot.capture().makeUnit {})
                }
            }
            await onRawThread {
                twice()
                twice()
                once()
            }
        }
        let mine = issues.filter { $0.site?.fileID.description == Self.file }
        #expect(mine == [.unitRanTwice(site: SubmitSite(fileID: "IdentityRuntimeTests/MakeUnitTests.swift", line: expectedLine))])
    }
}
