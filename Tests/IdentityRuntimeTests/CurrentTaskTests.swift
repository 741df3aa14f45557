import CIdentityTask
import Dispatch
@testable import IdentityRuntime
import Testing

/// The runtime reads the running task's address straight from the Concurrency runtime on every scope and unit;
/// these pin that the read says what `withUnsafeCurrentTask` says, so a runtime that changed it fails here.
@Suite("The running task's address")
struct CurrentTaskTests {
    private static func addressFromPublicAPI() -> UInt? {
        withUnsafeCurrentTask { task in task.map { UInt(bitPattern: unsafeBitCast($0, to: UnsafeRawPointer.self)) } }
    }

    /// The runtime's read, as a number (a pointer is not `Sendable`, and only its value is compared).
    private static func address() -> UInt? {
        identity_current_task().map { UInt(bitPattern: $0) }
    }

    @Test("inside a task it is the task withUnsafeCurrentTask names")
    func insideATaskItIsTheTaskThePublicAPINames() async {
        let address = Self.address()
        #expect(address != nil)
        #expect(address == Self.addressFromPublicAPI())
    }

    @Test("a dispatch worker outside every task reads none")
    func aDispatchWorkerOutsideEveryTaskReadsNone() async {
        let (direct, viaPublicAPI) = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: (Self.address(), Self.addressFromPublicAPI()))
            }
        }
        #expect(direct == nil)
        #expect(viaPublicAPI == nil)
    }

    @Test("a child task and an immediate task each read their own address, not their creator's")
    func eachTaskReadsItsOwnAddress() async {
        let parent = Self.address()
        let child = await Task { Self.address() }.value
        let immediate = await Task.immediate { Self.address() }.value
        #expect(parent != nil && child != nil && immediate != nil)
        #expect(child != parent)
        #expect(immediate != parent)
    }
}
