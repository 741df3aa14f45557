// What the samples of "Accounts and policies" stand for; see scripts/doc-samples.py. Declarations only.
import IdentityPolicy
import IdentityRuntime

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

// sample 1
let appDelegate: any PolicyDelegate = placeholder()
struct PINCheck: ConditionalLaunchCheck {
    func evaluate(identity: Identity, window: WindowID) async -> ConditionalLaunchOutcome { placeholder() }
}
func showMailbox() {}
func showAccountPicker() {}
func enableSave() {}

// samples 3, 4, 6
let manager: PolicyManager = placeholder()

// sample 4
final class Sessions: Sendable {
    func closeAll(for account: Identity) -> Bool { placeholder() }
}
let sessions: Sessions = placeholder()
func beginDrainAndExit() {}

// sample 5
let source: any PolicySource = placeholder()
