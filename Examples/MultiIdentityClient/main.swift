// MultiIdentityClient: one window, a personal and a work account, and the identity-switch handshakes.
//
//     swift run MultiIdentityClient                # the scripted tour; checks itself, exits 0 or 1
//     swift run MultiIdentityClient --interactive  # type: personal, work, import, web, pin 1234, cancel, signin, quit
//
// The main queue stands in for the UI's run loop (`dispatchMain()` below): every UI event and every
// completion handler runs there, one at a time. The runtime counts a main-queue block as "the main thread",
// even on Linux where the main queue then runs on worker threads. The handlers are in Client.swift.
import Dispatch
import Foundation
import IdentityPolicy
import IdentityRuntime
import Synchronization

let personal: Identity = "dana@outlook.com"    // unmanaged: no policy, switches at once
let work: Identity = "dana@contoso.com"        // the managed account (the primary user): PIN first
let otherTenant: Identity = "dana@fabrikam.com" // managed by someone else: never shown

// A PolicyManager *instance*: it keeps the UI identities to itself (`.isolated`), so the example leaves
// process-wide state (`IdentityContext`) alone and reads identities through `manager.effectiveUIIdentity`.
// An app whose other modules read `IdentityContext.effectiveUIIdentity` would use `PolicyManager.shared`
// (or `scope: .processWide`) instead; the handshakes behave the same.
var settings = RuntimeSettings()
settings.multiIdentity = true   // the app sets every level itself; nothing follows the primary user
settings.maxManagedAccounts = 1 // a device app with one work account: the SDK guide's original model
let manager = PolicyManager(
    settings: settings,
    // The policy source knows a policy for otherTenant, so that account is *claimed*: a managed account that
    // is not our primary user. With one managed account at most, switching to it is .notAllowed.
    policySource: StaticPolicySource([otherTenant: Policy(identity: otherTenant)]))
manager.setPrimaryUser(work)   // what EnrollmentManager does after enrolling the account
let pinPrompt = PINPrompt()
manager.registerConditionalLaunchCheck(pinPrompt)
let client = Client(manager: manager, pinPrompt: pinPrompt)
manager.delegate = client

// MARK: The scripted tour

var expectationsMet = 0

@MainActor func step(_ title: String) {
    watchdog.arm(title)
    print("\n== \(title)")
}

/// Stops the run with exit code 1 when `actual` is not what the tour expects.
@MainActor func expect<Value: Equatable>(
    _ what: String, _ actual: Value, _ expected: Value, as text: (Value) -> String
) {
    guard actual == expected else {
        print("\nMISMATCH: \(what): expected \(text(expected)), got \(text(actual))")
        exit(1)
    }
    expectationsMet += 1
    print("     ok: \(what): \(text(actual))")
}

@MainActor func expect(_ what: String, _ actual: SwitchIdentityResult, _ expected: SwitchIdentityResult) {
    expect(what, actual, expected) { ".\($0)" }
}

@MainActor func expect(_ what: String, _ actual: Identity?, _ expected: Identity?) {
    expect(what, actual, expected, as: show)
}

/// Starts a UI handler and waits for its completion: the script "watching the screen".
@MainActor func result(
    of start: (@escaping @MainActor (SwitchIdentityResult) -> Void) -> Void
) async -> SwitchIdentityResult {
    await withCheckedContinuation { continuation in start { continuation.resume(returning: $0) } }
}

@MainActor func runScript() async {
    var prompts = pinPrompt.appeared.makeAsyncIterator()
    var blocks = client.blocked.makeAsyncIterator()
    print("MultiIdentityClient, scripted (--interactive to drive it yourself)")
    print("personal account \(show(personal)), work account \(show(work)) (managed, PIN \(PINPrompt.correctPIN))")
    expect("effective UI identity at launch", client.effectiveUIIdentity, nil)

    step("1. Sign in to the personal account: unmanaged, so it switches at once")
    expect("result", await result { client.switchAccount(to: personal, done: $0) }, .success)
    expect("effective UI identity", client.effectiveUIIdentity, personal)

    step("2. Tap work, then change your mind while its PIN prompt is up: the newer call supersedes")
    let first = Task { await result { client.switchAccount(to: work, done: $0) } }   // started, not awaited
    expect("PIN prompt asks for", await prompts.next(), work)
    // A newer call for the same window while the first one's check is pending: the first completes .canceled.
    let second = await result { client.switchAccount(to: personal, done: $0) }
    expect("first call (work)", await first.value, .canceled)
    expect("second call (personal)", second, .success)
    expect("effective UI identity", client.effectiveUIIdentity, personal)

    step("3. Tap work: a wrong PIN fails, changes nothing and blocks the account until you sign in again")
    let wrong = Task { await result { client.switchAccount(to: work, done: $0) } }
    expect("PIN prompt asks for", await prompts.next(), work)
    pinPrompt.enter("0000")
    expect("result", await wrong.value, .failed)
    expect("effective UI identity", client.effectiveUIIdentity, personal)
    expect("blocked because", manager.blockReason(for: work), .conditionalLaunchBlocked) { $0 == .notBlocked ? "not blocked" : ".\($0)" }
    expect("the delegate was told", await blocks.next(), work)
    expect("result of tapping work again", await result { client.switchAccount(to: work, done: $0) }, .notAllowed)
    client.signInAgain(work)   // the user re-authenticates: the app lifts the block
    expect("blocked because", manager.blockReason(for: work), .notBlocked) { $0 == .notBlocked ? "not blocked" : ".\($0)" }
    let right = Task { await result { client.switchAccount(to: work, done: $0) } }
    expect("PIN prompt asks for", await prompts.next(), work)
    pinPrompt.enter(PINPrompt.correctPIN)
    expect("result", await right.value, .success)
    expect("effective UI identity", client.effectiveUIIdentity, work)

    step("4. Back to personal, then import a work document: the runtime asks the delegate to switch")
    expect("result", await result { client.switchAccount(to: personal, done: $0) }, .success)
    let importing = Task { await result { client.importDocument("q3-forecast.xlsx", ownedBy: work, done: $0) } }
    expect("PIN prompt asks for", await prompts.next(), work)   // the delegate's own switch runs the check
    pinPrompt.enter(PINPrompt.correctPIN)
    expect("import", await importing.value, .success)
    expect("effective UI identity", client.effectiveUIIdentity, work)

    step("5. Not allowed: a second managed account, and a main-thread thread identity that conflicts")
    expect("result", await result { client.switchAccount(to: otherTenant, done: $0) }, .notAllowed)   // claimed
    expect("result", await result { client.switchAccount(to: work, fromSheetOf: personal, done: $0) }, .notAllowed)
    expect("effective UI identity (unchanged)", client.effectiveUIIdentity, work)

    step("6. A web view runs under \"\" (the unmanaged identity); the window is restored after it")
    let web = client.openWebView()
    expect("effective UI identity inside", web.insideUI, .unmanaged)
    expect("effective file identity inside", web.insideFile, .unmanaged)
    expect("effective UI identity after", web.after, work)

    print("\nAll \(expectationsMet) expectations met.")
}

/// Exits 2 when a step of the script takes more than 20 s: a handshake that never completes must fail the
/// run, not hang it. It runs on a global queue, so it fires even if the main queue is stuck.
final class Watchdog: Sendable {
    private let generation = Atomic<Int>(0)

    func arm(_ title: String) {
        let armed = generation.add(1, ordering: .relaxed).newValue
        DispatchQueue.global().asyncAfter(deadline: .now() + 20) { [self] in
            guard generation.load(ordering: .relaxed) == armed else { return }
            print("\nSTALLED: no progress for 20 s in step \"\(title)\"")
            exit(2)
        }
    }
}
let watchdog = Watchdog()

// MARK: Interactive mode: the same handlers, driven by typed commands

@MainActor func handle(_ command: String) {
    let words = command.split(separator: " ").map(String.init)
    switch words.first {
    case "personal": client.switchAccount(to: personal)
    case "work": client.switchAccount(to: work)
    case "import": client.importDocument("q3-forecast.xlsx", ownedBy: work)
    case "web": client.openWebView()
    case "pin": pinPrompt.enter(words.dropFirst().first ?? "")
    case "cancel": pinPrompt.dismiss()
    case "signin": client.signInAgain(work)
    case "quit": exit(0)
    case nil: break
    default: print("commands: personal, work, import, web, pin <code>, cancel, signin, quit")
    }
}

if CommandLine.arguments.contains("--interactive") {
    print("MultiIdentityClient: personal \(show(personal)), work \(show(work)) (PIN \(PINPrompt.correctPIN)).")
    print("commands: personal, work, import, web, pin <code>, cancel, signin (after a wrong PIN), quit")
    // stdin is read on a thread of its own; each line becomes a UI event on the main queue.
    Thread {
        while let line = readLine() {
            DispatchQueue.main.async { handle(line.trimmingCharacters(in: .whitespaces)) }
        }
        // End of input: give completions still on their way a moment to print, then quit.
        DispatchQueue.main.asyncAfter(deadline: .now() + 0.5) { exit(0) }
    }.start()
} else {
    watchdog.arm("start")
    Task {   // on the main actor, like the rest of this file's top-level code
        await runScript()
        exit(0)
    }
}
dispatchMain()   // the run loop: serve the main queue until exit
