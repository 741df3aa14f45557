import Dispatch
import Foundation
@testable import IdentityProtection
import IdentityRuntime

/// Helpers of the wipe journal's suites: wipes run on threads of their own, paused and resumed.

func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

/// Writes a file owned by `identity` (its thread identity) through `manager`.
func write(_ manager: FileProtectionManager, _ path: String, as identity: Identity) throws {
    try IdentityContext.withThreadIdentity(identity) { () throws(ProtectionError) in
        try manager.writeFile(atPath: path, contents: Data("data of \(identity.name)".utf8))
    }
}

/// Waits (up to 10 s) until `condition` holds.
func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
    for _ in 0..<1000 {
        if try condition() { return true }
        usleep(10_000)
    }
    return false
}

/// Runs `body` on a new thread; the semaphore is signalled when it returns.
func onThread(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    Thread {
        body()
        done.signal()
    }.start()
    return done
}
