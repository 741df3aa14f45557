import IdentityNIO
import IdentityRuntime
import IdentityTesting
import NIOCore
import NIOPosix
import Testing

/// What must not happen: an identity left on a loop thread after a task or callback that threw.
@Suite("IdentityNIO hygiene: a throwing task or callback leaves the loop thread as it found it")
struct NIOHygieneTests {
    struct Failure: Error {}

    static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    @Test("after throwing submit, scheduleTask and flatMapThrowing, a raw task on the loop finds no identity",
          arguments: PropagationTable.submitters)
    func throwingUnitsLeaveNothing(submitter: Identity?) async throws {
        let loop = Self.group.next()
        let (submitted, scheduled, mapped) = IdentityContext.withThreadIdentity(submitter) {
            (loop.submit(flow: .inherit) { () throws -> Int in throw Failure() },
             loop.scheduleTask(in: .milliseconds(1), flow: .inherit) { () throws -> Int in throw Failure() }.futureResult,
             loop.makeSucceededFuture(1).flatMapThrowing(flow: .assign("carol@contoso.com")) { _ -> Int in throw Failure() })
        }
        for future in [submitted, scheduled, mapped] {
            await #expect(throws: Failure.self) { try await future.get() }
        }
        let afterwards = try await loop.submit { IdentityContext.currentThreadIdentity }.get()
        #expect(afterwards == nil)
    }
}
