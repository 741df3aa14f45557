import IdentityRuntime
import IdentityTracing
import ServiceContextModule
import Testing

@Suite("ServiceContext <-> thread identity")
struct ServiceContextBridgeTests {
    @Test("binding a context with an identity makes it the thread identity")
    func contextToThread() {
        var context = ServiceContext.topLevel
        context.identity = "alice@contoso.com"
        IdentityContext.withServiceContext(context) {
            #expect(IdentityContext.currentThreadIdentity == "alice@contoso.com")
            #expect(IdentityContext.effectiveFileIdentity == "alice@contoso.com")
            #expect(ServiceContext.current?.identity == "alice@contoso.com")
        }
        #expect(IdentityContext.currentThreadIdentity == nil)
        #expect(ServiceContext.current == nil)
    }

    @Test("the context's identity reaches Task {}, async let and task-group children")
    func contextToThreadInTasks() async {
        var context = ServiceContext.topLevel
        context.identity = "bob@contoso.com"
        let task = IdentityContext.withServiceContext(context) {
            Task { (IdentityContext.currentThreadIdentity, ServiceContext.current?.identity) }
        }
        let (thread, bound) = await task.value
        #expect(thread == "bob@contoso.com")
        #expect(bound == "bob@contoso.com")

        await IdentityContext.withServiceContext(context) {
            async let child = IdentityContext.currentThreadIdentity
            #expect(await child == "bob@contoso.com")
            let seen = await withTaskGroup(of: Identity?.self, returning: [Identity?].self) { group in
                for _ in 0..<8 { group.addTask { IdentityContext.currentThreadIdentity } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(seen == Array(repeating: "bob@contoso.com", count: 8))
        }
    }

    @Test("a context without an identity hides an outer thread identity")
    func contextWithoutIdentityHides() {
        IdentityContext.withThreadIdentity("outer@contoso.com") {
            IdentityContext.withServiceContext(.topLevel) {
                #expect(IdentityContext.currentThreadIdentity == nil)
            }
            #expect(IdentityContext.currentThreadIdentity == "outer@contoso.com")
        }
    }

    @Test("withThreadIdentity is visible as the ServiceContext identity")
    func threadToContext() {
        #expect(ServiceContext.currentWithIdentity.identity == nil)
        IdentityContext.withThreadIdentity("carol@contoso.com") {
            #expect(ServiceContext.currentWithIdentity.identity == "carol@contoso.com")
        }
    }

    @Test("withThreadIdentity is visible as the ServiceContext identity in tasks created inside")
    func threadToContextInTasks() async {
        let task = IdentityContext.withThreadIdentity("dave@contoso.com") {
            Task { ServiceContext.currentWithIdentity.identity }
        }
        #expect(await task.value == "dave@contoso.com")
        await IdentityContext.withThreadIdentity("dave@contoso.com") {
            let seen = await withTaskGroup(of: Identity?.self, returning: [Identity?].self) { group in
                for _ in 0..<8 { group.addTask { ServiceContext.currentWithIdentity.identity } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(seen == Array(repeating: "dave@contoso.com", count: 8))
        }
        let detached = IdentityContext.withThreadIdentity("dave@contoso.com") {
            Task.detached { ServiceContext.currentWithIdentity.identity }
        }
        #expect(await detached.value == nil)
    }

    @Test("a thread identity set inside a bound context wins over the context's")
    func innerThreadIdentityWins() {
        ServiceContext.withIdentity("outer@contoso.com") {
            IdentityContext.withThreadIdentity("inner@contoso.com") {
                #expect(ServiceContext.currentWithIdentity.identity == "inner@contoso.com")
            }
            #expect(ServiceContext.currentWithIdentity.identity == "outer@contoso.com")
        }
    }

    @Test("ServiceContext.withIdentity binds both, keeps the rest of the context, and nil removes both")
    func withIdentity() async {
        enum TraceKey: ServiceContextKey { typealias Value = String }
        var context = ServiceContext.topLevel
        context[TraceKey.self] = "trace-1"
        await IdentityContext.withServiceContext(context) {
            await ServiceContext.withIdentity("erin@contoso.com") {
                #expect(IdentityContext.currentThreadIdentity == "erin@contoso.com")
                #expect(ServiceContext.current?.identity == "erin@contoso.com")
                #expect(ServiceContext.current?[TraceKey.self] == "trace-1")
                await ServiceContext.withIdentity(nil) {
                    await Task.yield()
                    #expect(IdentityContext.currentThreadIdentity == nil)
                    #expect(ServiceContext.current?.identity == nil)
                    #expect(ServiceContext.currentWithIdentity.identity == nil)
                }
            }
        }
    }

    @Test("a wrapped queue hop carries the identity, but not the rest of the service context")
    func dispatchQueueHop() async {
        enum TraceKey: ServiceContextKey { typealias Value = String }
        var context = ServiceContext.topLevel
        context[TraceKey.self] = "trace-2"
        context.identity = "frank@contoso.com"
        let queue = IdentityDispatchQueue(label: "tracing-test")
        let (identity, trace) = await withCheckedContinuation {
            (continuation: CheckedContinuation<(Identity?, String?), Never>) in
            IdentityContext.withServiceContext(context) {
                queue.async {
                    let seen = ServiceContext.currentWithIdentity
                    continuation.resume(returning: (seen.identity, seen[TraceKey.self]))
                }
            }
        }
        #expect(identity == "frank@contoso.com")
        // The queue wrapper captures the thread identity only; swift-service-context's task-local does not
        // cross a DispatchQueue. Carry the context explicitly (or use a Task) where trace IDs matter.
        #expect(trace == nil)
    }
}
