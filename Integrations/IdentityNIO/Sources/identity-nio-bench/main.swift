import Dispatch
import IdentityNIO
import IdentityRuntime
import NIOCore
import NIOPosix
import Synchronization

/// `identity-nio-bench --side raw|ours --count N [--what execute|submit|schedule|future]`: N tasks (`execute`,
/// `submit`, `scheduleTask(in: .zero)`) or N future callbacks on one event loop, for
/// `scripts/callgrind-execute.sh` to count instructions per operation.
///
/// Every operation is submitted from a task already running on the loop, so it goes straight into the loop's
/// queue (no wakeup per operation): the count is the submission plus the run, repeatable under callgrind.
/// `ours` submits under a named identity with `flow: .inherit`; `raw` is NIO's own call.
let arguments = CommandLine.arguments.dropFirst()
func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), arguments.index(after: index) < arguments.endIndex else { return nil }
    return arguments[arguments.index(after: index)]
}
let side = option("--side") ?? "ours"
let count = option("--count").flatMap(Int.init) ?? 10_000
let what = option("--what") ?? "execute"
let whats = ["execute", "submit", "schedule", "future"]
guard ["raw", "ours"].contains(side), let whatIndex = whats.firstIndex(of: what) else {
    print("usage: identity-nio-bench --side raw|ours --count N [--what execute|submit|schedule|future]")
    exit(64)
}
// Decided once, before the loop: comparing the option strings per operation cost one side more than the other.
let mode = whatIndex * 2 + (side == "raw" ? 0 : 1)

final class Sink: Sendable {
    let total = Atomic<Int>(0)
}

let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let loop = group.next()
let sink = Sink()
let identity: Identity = "alice@contoso.com"

func round(_ count: Int) {
    let done = DispatchSemaphore(value: 0)
    loop.execute {
        IdentityContext.withThreadIdentity(identity) {
            for index in 0..<count {
                switch mode {
                case 0:
                    loop.execute { sink.total.add(index, ordering: .relaxed) }
                case 1:
                    loop.execute(flow: .inherit) { sink.total.add(index, ordering: .relaxed) }
                case 2:
                    _ = loop.submit { sink.total.add(index, ordering: .relaxed) }
                case 3:
                    _ = loop.submit(flow: .inherit) { sink.total.add(index, ordering: .relaxed) }
                case 4:
                    loop.scheduleTask(in: .zero) { sink.total.add(index, ordering: .relaxed) }
                case 5:
                    loop.scheduleTask(in: .zero, flow: .inherit) { sink.total.add(index, ordering: .relaxed) }
                case 6:
                    loop.makeSucceededFuture(index).whenSuccess { sink.total.add($0, ordering: .relaxed) }
                default:
                    loop.makeSucceededFuture(index).whenSuccess(flow: .inherit) { sink.total.add($0, ordering: .relaxed) }
                }
            }
        }
        // Scheduled tasks run in deadline order: the signal is scheduled too, after the last of them.
        if what == "schedule" {
            loop.scheduleTask(in: .zero) { done.signal() }
        } else {
            loop.execute { done.signal() }
        }
    }
    done.wait()
}

round(1_000)   // warm-up
round(count)
try group.syncShutdownGracefully()
print(sink.total.load(ordering: .relaxed))
