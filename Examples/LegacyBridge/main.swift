// LegacyBridge: carrying an identity through code the runtime does not wrap.
//
//     swift run LegacyBridge
//
// A callback API, a raw Thread and a detached task each run once without help (the identity is lost) and
// once with an IdentitySnapshot captured at the call site (the identity arrives).
import Dispatch
import Foundation
import IdentityRuntime

/// A third-party client that calls back on its own queue: the runtime cannot see into it.
final class LegacyClient: Sendable {
    private let callbackQueue = DispatchQueue(label: "legacy.callbacks")

    func fetch(_ completion: @escaping @Sendable (String) -> Void) {
        callbackQueue.asyncAfter(deadline: .now() + .milliseconds(10)) { completion("report.pdf") }
    }
}

func show(_ label: String, _ identity: Identity?) {
    let name = identity.map { $0.isUnmanaged ? "\"\" (unmanaged)" : $0.name } ?? "nil (no identity)"
    print("  \(label.padding(toLength: 44, withPad: " ", startingAt: 0)) \(name)")
}

func waitFor(_ body: (@escaping @Sendable () -> Void) -> Void) {
    let done = DispatchSemaphore(value: 0)
    body { done.signal() }
    done.wait()
}

let alice: Identity = "alice@contoso.com"
let client = LegacyClient()

print("Submitting work as \(alice.name):\n")
IdentityContext.withThreadIdentity(alice) {
    show("on the submitting thread", IdentityContext.currentThreadIdentity)

    print("\n1. A callback API")
    waitFor { finished in
        client.fetch { _ in
            show("callback, unwrapped", IdentityContext.currentThreadIdentity)
            finished()
        }
    }
    let snapshot = IdentitySnapshot.capture()
    waitFor { finished in
        client.fetch { _ in
            snapshot.run { show("callback, snapshot.run", IdentityContext.currentThreadIdentity) }
            finished()
        }
    }

    print("\n2. A raw Thread")
    waitFor { finished in
        Thread {
            show("raw Thread, unwrapped", IdentityContext.currentThreadIdentity)
            finished()
        }.start()
    }
    waitFor { finished in
        Thread {
            snapshot.run { show("raw Thread, snapshot.run", IdentityContext.currentThreadIdentity) }
            finished()
        }.start()
    }

    print("\n3. A detached task")
    waitFor { finished in
        Task.detached {
            show("Task.detached, unwrapped", IdentityContext.currentThreadIdentity)
            finished()
        }
    }
    waitFor { finished in
        Task.detached {
            await snapshot.run { () async -> Void in
                try? await Task.sleep(for: .milliseconds(1))
                show("Task.detached, snapshot.run (after await)", IdentityContext.currentThreadIdentity)
            }
            finished()
        }
    }

    print("\n4. For comparison: what the runtime carries by itself")
    waitFor { finished in
        IdentityDispatchQueue.global().async {
            show("IdentityDispatchQueue.async", IdentityContext.currentThreadIdentity)
            Task {
                show("Task {} inside it", IdentityContext.currentThreadIdentity)
                finished()
            }
        }
    }
}

print("""

What goes wrong without a snapshot: the unwrapped callback, thread and detached task ran with no identity,
so a file they write would be owned by the process identity (or nobody), not by \(alice.name).
""")
