import Dispatch
import Foundation

/// Whether the current code runs "on the main thread" in the sense of <doc:IdentitiesAndPropagation>: the process's main thread,
/// or a block of the main dispatch queue (which includes main-actor jobs).
///
/// The second half matters where the main thread does not service the main queue itself: after
/// `dispatchMain()`, and in async `main` programs and test runners on Linux, the main queue (and with it
/// `MainActor`) runs on worker threads, one block at a time.
enum MainThread {
    private static let key: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    static var isCurrent: Bool {
        Thread.isMainThread || DispatchQueue.getSpecific(key: key) == true
    }
}
