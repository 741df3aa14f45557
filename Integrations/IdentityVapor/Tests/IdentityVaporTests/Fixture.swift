import Dispatch
import Foundation
import IdentityPolicy
import IdentityAssertions
import IdentityRuntime
import IdentityTesting
import IdentityHTTP
@testable import IdentityVapor
import Testing
import Vapor
import VaporTesting

let alice: Identity = "alice@contoso.com"
let dave: Identity = "dave@contoso.com"
let carol: Identity = "carol@fabrikam.com"

/// One service under test: keys, a verifier for audience "documents", a policy manager with two tenants
/// (contoso encrypts files, fabrikam does not) and dave blocked, and routes behind the middleware that report
/// what the handler and its hops see.
struct Fixture {
    let signingKey: AssertionSigningKey
    let signer: IdentityAssertionSigner
    let verifier: IdentityAssertionVerifier
    let policies: PolicyManager
    let handlerRuns = HandlerRuns()

    init(
        policySource: (any PolicySource)? = nil, replayCacheCapacity: Int = 100_000,
        accounts: [Identity] = [alice, dave, carol]
    ) throws {
        signingKey = try AssertionSigningKey()
        signer = IdentityAssertionSigner(key: signingKey, keyID: "k1", issuer: "frontend")
        verifier = IdentityAssertionVerifier(
            keys: ["k1": signingKey.publicKey], issuers: ["frontend"], audience: "documents",
            replayCacheCapacity: replayCacheCapacity)
        policies = PolicyManager(policySource: policySource ?? Self.tenantPolicies())
        for account in accounts { policies.registerAccount(account) }
        policies.blockAccount(dave, reason: .clockedOut)
    }

    /// A token for `account` that this service must refuse as another signer's: signed with a new key
    /// (`forged`), or with the fixture's key under another key ID or issuer.
    func token(_ account: Identity, forged: Bool = false, keyID: String = "k1", issuer: String = "frontend") throws -> String {
        let key = forged ? try AssertionSigningKey() : signingKey
        return try IdentityAssertionSigner(key: key, keyID: keyID, issuer: issuer)
            .sign(account: account, tenant: TenantID.domain(of: account)?.rawValue, audience: "documents")
    }

    static func tenantPolicies() -> StaticPolicySource {
        let contoso = Policy(identity: nil, isFileEncryptionRequired: true)
        let fabrikam = Policy(identity: nil, isFileEncryptionRequired: false)
        return StaticPolicySource(tenants: ["contoso.com": contoso, "fabrikam.com": fabrikam])
    }

    var middleware: IdentityMiddleware { IdentityMiddleware(verifier: verifier, policies: policies) }

    /// The middleware over this fixture's verifier and policies, configured otherwise.
    func middleware(
        assertionHeader: HTTPHeaders.Name = IdentityMiddleware.defaultAssertionHeader, acceptsBearerToken: Bool = true,
        checksTenant: Bool = true, problemTypeBase: String = "https://identity-runtime.invalid/problems/"
    ) -> IdentityMiddleware {
        IdentityMiddleware(
            verifier: verifier, policies: policies, assertionHeader: assertionHeader,
            acceptsBearerToken: acceptsBearerToken, checksTenant: checksTenant, problemTypeBase: problemTypeBase)
    }

    /// An application whose one route, `/whoami`, stands behind `middleware` and answers the thread identity
    /// and the admitted tenant.
    func withApplication(behind middleware: IdentityMiddleware, _ test: (Application) async throws -> Void) async throws {
        try await withApp(configure: { app in
            app.grouped(middleware).get("whoami") { request async -> String in
                "\(IdentityContext.currentThreadIdentity?.name ?? "-") \(request.admittedIdentity?.tenant ?? "-")"
            }
        }, test)
    }

    func token(_ account: Identity, tenant: String? = nil, audience: String = "documents") throws -> String {
        try signer.sign(account: account, tenant: tenant ?? TenantID.domain(of: account)?.rawValue, audience: audience)
    }

    /// An application with the routes behind the middleware (`/whoami`, `/sync`, `/hops`, `/missing`, `/fails`,
    /// `/admits-another`, `/upload`, `/stream`) and one outside it (`/public`).
    func withApplication(_ test: (Application) async throws -> Void) async throws {
        try await withApp(configure: configure, test)
    }

    func configure(_ app: Application) async throws {
        app.logger.logLevel = .critical  // a line per request otherwise
        let runs = handlerRuns
        let policies = policies
        app.get("public") { _ async -> String in
            "\(IdentityContext.currentThreadIdentity?.name ?? "-") \(IdentityContext.effectiveFileIdentity?.name ?? "-")"
        }
        let protected = app.grouped(FrontMiddleware()).grouped(middleware)
        protected.get("whoami") { request async -> String in
            runs.increment()
            return await Self.whoami(request)
        }
        // A synchronous handler: Vapor may call it on the event loop, outside the admission scope.
        protected.get("sync") { request -> String in
            runs.increment()
            return "\(request.admittedIdentity?.account.name ?? "-") \(IdentityContext.currentThreadIdentity?.name ?? "-")"
        }
        protected.get("hops") { request async throws -> String in
            runs.increment()
            return try await Self.hops(request)
        }
        protected.get("missing") { _ async throws -> String in
            runs.increment()
            try await Task.sleep(for: .milliseconds(1))
            throw Abort(.notFound, reason: "no such document")
        }
        protected.get("fails") { _ async throws -> String in
            runs.increment()
            try await Task<Void, any Error> { try await Task.sleep(for: .milliseconds(1)); throw HandlerFailure() }.value
            return "unreachable"
        }
        // An AdmissionError of the handler's own (it admits another account, who is blocked) is the
        // handler's error, not a refusal of the request.
        protected.get("admits-another") { _ async throws -> String in
            runs.increment()
            return try await policies.withAdmittedIdentity(dave, reason: "nested") { "unreachable" }
        }
        protected.on(.POST, "upload", body: .stream) { request async throws -> String in
            runs.increment()
            var seen: [String] = []
            var bytes = 0
            for try await chunk in request.body {
                bytes += chunk.readableBytes
                seen.append(IdentityContext.currentThreadIdentity?.name ?? "-")
            }
            seen.append(IdentityContext.currentThreadIdentity?.name ?? "-")
            return "\(bytes) \(Set(seen).sorted().joined(separator: ","))"
        }
        protected.get("stream") { request async -> Response in
            runs.increment()
            let snapshot = IdentitySnapshot.capture()
            return Response(status: .ok, body: .init(managedAsyncStream: { writer in
                try await Task.sleep(for: .milliseconds(1))
                let unscoped = IdentityContext.currentThreadIdentity?.name ?? "-"
                let scoped = await snapshot.run { () async -> String in
                    try? await Task.sleep(for: .milliseconds(1))
                    return IdentityContext.currentThreadIdentity?.name ?? "-"
                }
                try await writer.writeBuffer(ByteBuffer(string: "\(unscoped) \(scoped)"))
            }))
        }
    }

    /// What the handler sees: the admitted account, the thread identity, an IdentityDispatchQueue block, a
    /// Task, a queue-then-Task hop, a detached task, a raw queue, the policy, the tenant, the source, and the
    /// policy as `identityPolicy`.
    static func whoami(_ request: Request) async -> String {
        let queue = IdentityDispatchQueue(label: "hop")
        let onQueue: Identity? = await withCheckedContinuation { done in
            queue.async { done.resume(returning: IdentityContext.effectiveFileIdentity) }
        }
        let inTask = await Task { IdentityContext.effectiveFileIdentity }.value
        let viaQueueThenTask: Identity? = await withCheckedContinuation { done in
            queue.async { Task { done.resume(returning: IdentityContext.effectiveFileIdentity) } }
        }
        let detached = await Task.detached { IdentityContext.effectiveFileIdentity }.value
        let raw: Identity? = await withCheckedContinuation { done in
            DispatchQueue.global().async { done.resume(returning: IdentityContext.effectiveFileIdentity) }
        }
        let admitted = request.admittedIdentity
        return [
            admitted?.account.name ?? "-", IdentityContext.currentThreadIdentity?.name ?? "-",
            onQueue?.name ?? "-", inTask?.name ?? "-", viaQueueThenTask?.name ?? "-",
            detached?.name ?? "-", raw?.name ?? "-",
            admitted.map { $0.policy.isFileEncryptionRequired ? "encrypts" : "clear" } ?? "-",
            admitted?.tenant ?? "-", admitted?.source.rawValue ?? "-",
            request.identityPolicy.map { $0.isFileEncryptionRequired ? "encrypts" : "clear" } ?? "-",
        ].joined(separator: " ")
    }

    /// The thread identity after each of several suspensions (sleeps of 0 to 2 ms, yields, an event-loop
    /// hop, a child task, an `async let`, a task group), then the admitted account and the policy: every
    /// entry must be the same account.
    static func hops(_ request: Request) async throws -> String {
        func current() -> String { IdentityContext.currentThreadIdentity?.name ?? "-" }
        var seen: [String] = [current()]
        for round in 0..<4 {
            try await Task.sleep(for: .microseconds(Int.random(in: 0...2_000)))
            seen.append(current())
            await Task.yield()
            seen.append(current())
            if round == 1 {
                // A hop through the request's event loop and back: the awaiting task keeps its identity.
                _ = try await request.eventLoop.submit { 1 }.get()
                seen.append(current())
            }
        }
        seen.append(await Task { try? await Task.sleep(for: .milliseconds(1)); return current() }.value)
        async let child = { () async -> String in await Task.yield(); return current() }()
        seen.append(await child)
        let fromGroup = await withTaskGroup(of: String.self) { group in
            for _ in 0..<3 { group.addTask { await Task.yield(); return current() } }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        seen += fromGroup
        seen.append(request.admittedIdentity?.account.name ?? "-")
        let policy = request.identityPolicy.map { $0.isFileEncryptionRequired ? "encrypts" : "clear" } ?? "-"
        return seen.joined(separator: " ") + " | " + policy
    }
}

struct HandlerFailure: Error {}

/// Middleware in front of the identity middleware: it reports, in response headers, the thread identity it
/// runs under (`x-front-identity`) and the request's admitted identity once the chain answered (`x-admitted`).
struct FrontMiddleware: AsyncMiddleware {
    func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        let front = IdentityContext.currentThreadIdentity?.name ?? "-"
        let response = try await next.respond(to: request)
        response.headers.replaceOrAdd(name: "x-front-identity", value: front)
        response.headers.replaceOrAdd(name: "x-admitted", value: request.admittedIdentity?.account.name ?? "-")
        return response
    }
}

/// A value behind an `NSLock`. Not `Synchronization.Mutex`: its Linux fast path is atomics in the
/// uninstrumented standard library, which ThreadSanitizer does not see, so it reports the guarded accesses as
/// races (seen here); `NSLock` is a pthread mutex, which it sees.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

final class HandlerRuns: Sendable {
    private let count = Locked(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// The problem document of a refusal.
func problem(_ response: TestingHTTPResponse) throws -> IdentityHTTPProblem.Document {
    #expect(response.headers.first(name: .contentType) == IdentityHTTPProblem.contentType)
    return try JSONDecoder().decode(IdentityHTTPProblem.Document.self, from: Data(buffer: response.body))
}

func header(_ token: String) -> HTTPHeaders {
    ["x-identity-assertion": token]
}

func words(_ response: TestingHTTPResponse) -> [String] {
    String(buffer: response.body).split(separator: " ").map(String.init)
}

/// The fixture's application served on 127.0.0.1 (a port the system picks), for requests that cross a real
/// connection: the server's event-loop threads, streamed bodies.
struct LiveServer {
    let app: Application
    let port: Int

    func send(_ method: HTTPMethod, _ path: String, headers: HTTPHeaders = [:], body: ByteBuffer? = nil) async throws -> ClientResponse {
        try await app.client.send(method, headers: headers, to: URI(string: "http://127.0.0.1:\(port)/\(path)")) { request in
            request.body = body
        }
    }
}

extension ClientResponse {
    var text: String { body.map { String(buffer: $0) } ?? "" }
}

extension Fixture {
    func withLiveServer(_ test: (LiveServer) async throws -> Void) async throws {
        try await withApp(configure: configure) { app in
            try await app.server.start(address: .hostname("127.0.0.1", port: 0))
            do {
                let port = try #require(app.http.server.shared.localAddress?.port)
                try await test(LiveServer(app: app, port: port))
            } catch {
                await app.server.shutdown()
                throw error
            }
            await app.server.shutdown()
        }
    }
}
