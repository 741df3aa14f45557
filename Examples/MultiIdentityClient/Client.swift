// The app side of MultiIdentityClient: one window, its UI event handlers, the PIN prompt (a conditional-launch
// check) and the policy delegate. Everything here runs on the main queue (the main actor), as UI code does.
import Dispatch
import Foundation
import IdentityPolicy
import IdentityRuntime

/// How identities are printed: `nil` (no identity), `""` (unmanaged) or the account name.
func show(_ identity: Identity?) -> String {
    identity.map { $0.isUnmanaged ? "\"\"" : $0.name } ?? "nil"
}

/// The app's one window (`WindowID.main`) and its handlers. The client is also the `PolicyDelegate`: the
/// runtime asks it to switch accounts when something needs another account on screen.
@MainActor
final class Client: PolicyDelegate {
    let manager: PolicyManager
    let pinPrompt: PINPrompt

    init(manager: PolicyManager, pinPrompt: PINPrompt) {
        self.manager = manager
        self.pinPrompt = pinPrompt
        (blocked, blockedContinuation) = AsyncStream.makeStream()
    }

    /// Who the window is showing right now: thread identity, else (we are on the main thread) the window's
    /// UI identity, else the process identity. Our manager is an isolated instance, so we ask it rather than
    /// `IdentityContext.effectiveUIIdentity`, which only sees the UI identities of a process-wide manager.
    var effectiveUIIdentity: Identity? {
        manager.effectiveUIIdentity(for: .main)
    }

    // MARK: UI events

    /// The account picker: show `account` in the window (the app-initiated handshake). An unmanaged account
    /// switches at once; the managed one runs the PIN prompt first. The result arrives on the main queue.
    func switchAccount(to account: Identity, done: @escaping @MainActor (SwitchIdentityResult) -> Void = { _ in }) {
        print("[ui] switch to \(show(account))")
        setUIPolicyIdentity(account, before: effectiveUIIdentity, done: done)
    }

    /// A sheet of `sheetAccount`'s mailbox runs its code under that account (a thread identity, here on the
    /// main thread). If a button there asks the window to show a different account, the runtime refuses:
    /// the thread identity would contradict the window.
    func switchAccount(to account: Identity, fromSheetOf sheetAccount: Identity,
                       done: @escaping @MainActor (SwitchIdentityResult) -> Void = { _ in }) {
        let before = effectiveUIIdentity
        IdentityContext.withThreadIdentity(sheetAccount) {
            print("[ui] a sheet running as \(show(sheetAccount)) (effective UI identity there: "
                + "\(show(effectiveUIIdentity))) asks to show \(show(account))")
            setUIPolicyIdentity(account, before: before, done: done)
        }
    }

    private func setUIPolicyIdentity(_ account: Identity, before: Identity?,
                                     done: @escaping @MainActor (SwitchIdentityResult) -> Void) {
        manager.setUIPolicyIdentity(account, for: .main, completionQueue: .main) { result in
            MainActor.assumeIsolated {
                print("     setUIPolicyIdentity(\(show(account))) -> \(result); "
                    + "effective UI identity \(show(before)) -> \(show(self.effectiveUIIdentity))")
                done(result)
            }
        }
    }

    /// "Open in…" hands the app a document owned by `owner`. The import needs the window to show `owner`;
    /// when it shows someone else, the runtime asks the delegate (below) and the import waits for the answer.
    /// (A runtime hook for imports would make the `requestIdentitySwitch` call; here the handler makes it.)
    func importDocument(_ file: String, ownedBy owner: Identity,
                        done: @escaping @MainActor (SwitchIdentityResult) -> Void = { _ in }) {
        print("[ui] import \(file), owned by \(show(owner))")
        Task {   // inherits the main actor; only the await below leaves it
            var result = SwitchIdentityResult.success
            if effectiveUIIdentity != owner {
                print("     the window shows \(show(effectiveUIIdentity)): "
                    + "requestIdentitySwitch(to: \(show(owner)), reason: .documentImport) waits for the delegate")
                result = await manager.requestIdentitySwitch(to: owner, reason: .documentImport, window: .main)
                print("     requestIdentitySwitch -> \(result); effective UI identity \(show(effectiveUIIdentity))")
            }
            print(result == .success ? "     imported \(file) as \(show(owner))" : "     import abandoned: \(result)")
            done(result)
        }
    }

    /// A web view may show any site: it runs under `""` (`Identity.unmanaged`, "no account"), so no account's
    /// policy or file ownership applies to it. The thread-identity scope ends with the closure, and the window
    /// shows its account again. Returns what the effective identities were inside and after.
    @discardableResult
    func openWebView() -> (insideUI: Identity?, insideFile: Identity?, after: Identity?) {
        print("[ui] open web view (window shows \(show(effectiveUIIdentity)))")
        let (ui, file) = IdentityContext.withThreadIdentity(.unmanaged) {
            (effectiveUIIdentity, IdentityContext.effectiveFileIdentity)
        }
        print("     inside: effective UI identity \(show(ui)), effective file identity \(show(file))")
        print("     closed: effective UI identity \(show(effectiveUIIdentity)), "
            + "thread identity \(show(IdentityContext.currentThreadIdentity))")
        return (ui, file, effectiveUIIdentity)
    }

    // MARK: PolicyDelegate

    /// The runtime needs the window to show `identity`. We are called on the requesting task's thread and
    /// answer later, from the UI: ask the user, switch with our own `setUIPolicyIdentity` (which runs the PIN
    /// prompt), then hand that result back. The import waits all that time.
    nonisolated func identitySwitchRequired(
        _ identity: Identity, reason: IdentitySwitchReason, window: WindowID,
        completionHandler: @escaping @Sendable (SwitchIdentityResult) -> Void
    ) {
        DispatchQueue.main.async {
            print("     [delegate] identitySwitchRequired(\(show(identity)), reason: .\(reason))")
            print("     [dialog] \"This document belongs to \(show(identity)). Switch accounts?\" -> Switch")
            self.switchAccount(to: identity) { result in
                print("     [delegate] answers the runtime: \(result)")
                completionHandler(result)
            }
        }
    }

    /// The runtime blocked `account` (a wrong PIN, a dismissed prompt): take it off the screen, then answer.
    nonisolated func blockAccount(
        _ account: Identity, reason: BlockAccountReason, window: WindowID?,
        completionHandler: @escaping @Sendable (BlockAccountResult) -> Void
    ) {
        DispatchQueue.main.async {
            print("     [delegate] blockAccount(\(show(account)), reason: .\(reason)): \"Sign in again to use this account\"")
            self.blockedContinuation.yield(account)
            completionHandler(.success)
        }
    }

    /// The accounts the runtime asked us to block, in order.
    nonisolated let blocked: AsyncStream<Identity>
    private nonisolated let blockedContinuation: AsyncStream<Identity>.Continuation

    /// The user signed in to `account` again: lift the block of its failed or cancelled PIN prompt.
    func signInAgain(_ account: Identity) {
        print("[ui] sign in again to \(show(account))")
        manager.unblockAccount(account)
    }
}

/// The conditional-launch check: a PIN prompt, simulated (typing the PIN is the `pin 1234` command, or the
/// script calling `enter(_:)`). The runtime calls `evaluate` from the task running a switch to the managed
/// account; the prompt itself is UI, so its state lives on the main actor and needs no lock.
@MainActor
final class PINPrompt: ConditionalLaunchCheck {
    static let correctPIN = "1234"

    /// The prompt on screen: which evaluation it answers, for whom, and how to answer it.
    private var showing: (id: UUID, account: Identity, answer: CheckedContinuation<ConditionalLaunchOutcome, Never>)?
    /// Each prompt as it appears (the script waits on this; an interactive user reads the screen).
    let appeared: AsyncStream<Identity>
    private let appearedContinuation: AsyncStream<Identity>.Continuation

    init() {
        (appeared, appearedContinuation) = AsyncStream.makeStream()
    }

    nonisolated func evaluate(identity: Identity, window: WindowID) async -> ConditionalLaunchOutcome {
        let id = UUID()
        let runsAs = IdentityContext.currentThreadIdentity   // the runtime runs checks as the requested account
        return await withTaskCancellationHandler {
            await ask(id: id, account: identity, runsAs: runsAs)
        } onCancel: {
            // A newer switch superseded this one: take the prompt down (the runtime ignores the outcome).
            Task { @MainActor in self.close(id: id, .cancels, why: "superseded by a newer switch") }
        }
    }

    private func ask(id: UUID, account: Identity, runsAs: Identity?) async -> ConditionalLaunchOutcome {
        // Cancelled before we got here: the onCancel task above found no prompt to close, so stop now.
        if Task.isCancelled { return .cancels }
        return await withCheckedContinuation { answer in
            if let old = showing { close(id: old.id, .cancels, why: "replaced") }
            showing = (id, account, answer)
            print("     [PIN prompt] for \(show(account)) (the check runs with thread identity \(show(runsAs)))")
            appearedContinuation.yield(account)
        }
    }

    /// The user typed `pin`: the right PIN passes, any other fails the switch.
    func enter(_ pin: String) {
        guard let showing else { return print("     (no PIN prompt on screen)") }
        close(id: showing.id, pin == Self.correctPIN ? .passes : .fails, why: "PIN \(pin) entered")
    }

    /// The user dismissed the prompt: the switch completes `.canceled`.
    func dismiss() {
        guard let showing else { return print("     (no PIN prompt on screen)") }
        close(id: showing.id, .cancels, why: "dismissed")
    }

    private func close(id: UUID, _ outcome: ConditionalLaunchOutcome, why: String) {
        guard let current = showing, current.id == id else { return }
        showing = nil
        print("     [PIN prompt] \(why): \(outcome)")
        current.answer.resume(returning: outcome)
    }
}
