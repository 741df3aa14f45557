import Dispatch
import IdentityLogging
import IdentityPolicy
import IdentityRuntime
import Logging
import Testing

// No test here sets the process identity: it is process-wide, and the "outside any scope" tests rely on its
// being nil while the other tests run in parallel.
@Suite("Logger.MetadataProvider.identity")
struct IdentityMetadataProviderTests {
    @Test("a line inside withThreadIdentity names the identity")
    func insideScope() {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity())
        IdentityContext.withThreadIdentity("alice@contoso.com") {
            logger.info("inside")
        }
        #expect(store.all.count == 1)
        #expect(store.all.first?.metadata["identity"] == "alice@contoso.com")
        #expect(store.all.first?.metadata["tenant"] == nil)
    }

    @Test("with a PolicyManager, the tenant is added too")
    func tenant() {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity(policyManager: PolicyManager()))
        IdentityContext.withThreadIdentity("bob@fabrikam.com") {
            logger.info("inside")
        }
        #expect(store.all.first?.metadata["identity"] == "bob@fabrikam.com")
        #expect(store.all.first?.metadata["tenant"] == "fabrikam.com")
    }

    @Test("a line outside any scope has no identity key")
    func outsideScope() {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity(policyManager: PolicyManager()))
        logger.info("outside")
        #expect(store.all.count == 1)
        #expect(store.all.first?.metadata["identity"] == nil)
        #expect(store.all.first?.metadata["tenant"] == nil)
        #expect(store.all.first?.metadata.isEmpty == true)
    }

    @Test("the provider itself returns an empty dictionary when no identity is set")
    func emptyWhenUnset() {
        #expect(Logger.MetadataProvider.identity().get().isEmpty)
        #expect(Logger.MetadataProvider.identity(policyManager: PolicyManager()).get().isEmpty)
    }

    @Test("a line in a Task created inside withThreadIdentity names the identity")
    func taskInheritsIdentity() async {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity())
        let task = IdentityContext.withThreadIdentity("carol@contoso.com") {
            Task { logger.info("in task") }
        }
        await task.value
        #expect(store.all.first?.metadata["identity"] == "carol@contoso.com")
    }

    @Test("a line in the async scope and in its child tasks names the identity")
    func asyncScope() async {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity())
        await IdentityContext.withThreadIdentity("dave@contoso.com") {
            logger.info("scope")
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<4 { group.addTask { logger.info("child") } }
            }
        }
        #expect(store.all.count == 5)
        #expect(store.all.allSatisfy { $0.metadata["identity"] == "dave@contoso.com" })
    }

    @Test("a line in a detached task has no identity")
    func detachedTaskHasNone() async {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity())
        let task = IdentityContext.withThreadIdentity("erin@contoso.com") {
            Task.detached { logger.info("detached") }
        }
        await task.value
        #expect(store.all.first?.metadata["identity"] == nil)
    }

    @Test("a line on an IdentityDispatchQueue hop names the submitter's identity")
    func dispatchQueueHop() async {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity(policyManager: PolicyManager()))
        let queue = IdentityDispatchQueue(label: "logging-test")
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            IdentityContext.withThreadIdentity("frank@northwind.com") {
                queue.async {
                    logger.info("on the queue")
                    continuation.resume()
                }
            }
        }
        // And a block submitted outside any scope logs none.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                logger.info("no identity")
                continuation.resume()
            }
        }
        #expect(store.all.count == 2)
        #expect(store.all[0].metadata["identity"] == "frank@northwind.com")
        #expect(store.all[0].metadata["tenant"] == "northwind.com")
        #expect(store.all[1].metadata["identity"] == nil)
    }

    @Test("the unmanaged identity is logged as an empty name, without a tenant")
    func unmanaged() {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity(policyManager: PolicyManager()))
        IdentityContext.withThreadIdentity(.unmanaged) {
            logger.info("web view")
        }
        #expect(store.all.first?.metadata["identity"] == "")
        #expect(store.all.first?.metadata["tenant"] == nil)
    }

    @Test("an inner scope's identity wins, and the outer one is back afterwards")
    func nested() {
        let (logger, store) = RecordingLogHandler.logger(provider: .identity())
        IdentityContext.withThreadIdentity("outer@contoso.com") {
            IdentityContext.withThreadIdentity("inner@contoso.com") { logger.info("inner") }
            logger.info("outer")
            IdentityContext.withThreadIdentity(nil) { logger.info("hidden") }
        }
        #expect(store.all.map { $0.metadata["identity"] } == ["inner@contoso.com", "outer@contoso.com", nil])
    }
}
