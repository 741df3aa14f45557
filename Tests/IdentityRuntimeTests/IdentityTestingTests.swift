import Dispatch
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("IdentityTesting: recorder, expectations, traits, leak probe")
struct IdentityTestingTests {
    @Test("the recorder keeps what each point observed, in order, from any thread")
    func recorder() async {
        let recorder = IdentityRecorder()
        let queue = IdentityDispatchQueue(label: "recorder")
        IdentityContext.withThreadIdentity(Accounts.alice) {
            queue.async { recorder.record("job") }
        }
        IdentityContext.withThreadIdentity(Accounts.bob) {
            queue.async { recorder.record("job") }
        }
        queue.sync(flow: .suppress) { recorder.record("sync") }
        #expect(recorder.threadIdentities(for: "job") == [Accounts.alice, Accounts.bob])
        #expect(recorder.threadIdentities(for: "sync") == [nil])
        #expect(recorder.observations.count == 3)
        recorder.reset()
        #expect(recorder.observations.isEmpty)
    }

    @Test("the thread identity trait runs the test under an identity", .threadIdentity("trait@contoso.com"))
    func threadIdentityTrait() async {
        expectThreadIdentity("trait@contoso.com")
        let fromTask = await Task { IdentityContext.currentThreadIdentity }.value
        #expect(fromTask == "trait@contoso.com")
        let fromQueue: Identity? = await observe { report in
            IdentityDispatchQueue.global().async { report(IdentityContext.currentThreadIdentity) }
        }
        #expect(fromQueue == "trait@contoso.com")
    }

    @Test("the unmanaged identity through the trait", .threadIdentity(.unmanaged))
    func unmanagedTrait() {
        expectThreadIdentity(.unmanaged)
    }

    @Test("strict mode trait: correct code passes", .identityStrictMode)
    func strictTrait() async {
        let recorder = IdentityRecorder()
        await withCheckedContinuation { continuation in
            IdentityContext.withThreadIdentity(Accounts.carol) {
                IdentityDispatchQueue.global().async {
                    recorder.record()
                    continuation.resume()
                }
            }
        }
        #expect(recorder.threadIdentities(for: "") == [Accounts.carol])
    }

    @Test("leak probe finds nothing on a clean pool; assertNoIdentityLeaks passes")
    func leakProbe() {
        #expect(IdentityLeakProbe.leftoverIdentitiesOnWorkers().isEmpty)
        assertNoIdentityLeaks()
    }
}
