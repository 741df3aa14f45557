import AsyncHTTPClient
import Foundation
import IdentityAssertions
import IdentityRuntime
import NIOCore
import NIOHTTP1
import TenantServiceKit
import Testing

/// A client for the tests: sends a request to the document service with a fresh assertion (or the given
/// headers) and decodes the report.
struct Client {
    let http: HTTPClient
    let base: String
    let services: TenantServices

    struct Answer {
        let status: Int
        let contentType: String?
        let report: DocumentReport?
        let text: String
    }

    func send(
        _ method: HTTPMethod, _ path: String, as account: Identity?, body: String? = nil, headers: [(String, String)] = []
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let account {
            let token = try services.gatewaySigner.sign(
                account: account, tenant: account.name.split(separator: "@").last.map(String.init), audience: "documents")
            request.headers.add(name: "x-identity-assertion", value: token)
        }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await http.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return Answer(
            status: Int(response.status.code), contentType: response.headers.first(name: "content-type"),
            report: try? JSONDecoder().decode(DocumentReport.self, from: Data(buffer: bytes)), text: String(buffer: bytes))
    }
}

/// Runs `body` against both services, live on loopback, then stops them.
func withServices(_ body: @escaping @Sendable (Client) async throws -> Void) async throws {
    let services = try TenantServices()
    let http = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
        try await services.withRunningServices { documents, _ in
            try await body(Client(http: http, base: documents, services: services))
        }
    } catch {
        try await http.shutdown()
        try await services.shutDown()
        throw error
    }
    try await http.shutdown()
    try await services.shutDown()
}

let alice = Tenants.account(tenant: 0, user: 0)       // t0: encrypts, saves to OneDrive and SharePoint
let bob = Tenants.account(tenant: 0, user: 1)         // alice's colleague
let carol = Tenants.account(tenant: 1, user: 0)       // t1: clear text, saves to OneDrive and the local drive

@Suite("TenantService: documents per account over loopback, through the identity middleware")
struct TenantServiceTests {
    @Test("a write and a read run as the caller at every hop, the audit service included; t0 encrypts at rest, t1 does not")
    func writeAndRead() async throws {
        try await withServices { client in
            for (account, encrypts) in [(alice, true), (carol, false)] {
                let written = try await client.send(.PUT, "/v1/docs/\(account.name)/plan", as: account, body: "\(account.name)|plan")
                #expect(written.status == 200)
                let report = try #require(written.report)
                #expect(report.account == account.name)
                #expect(report.hops == HopReport(queue: account.name, operation: account.name, task: account.name, remote: account.name))
                #expect(report.encrypted == encrypts)
                let path = "\(client.services.root)/documents/\(report.tenant)/\(account.name)/plan"
                #expect(try client.services.files.isFileEncrypted(atPath: path) == encrypts)
                let raw = try Data(contentsOf: URL(fileURLWithPath: path))
                #expect((String(data: raw, encoding: .utf8)?.contains("|plan") ?? false) == !encrypts)

                let read = try await client.send(.GET, "/v1/docs/\(account.name)/plan", as: account)
                #expect(read.status == 200)
                #expect(read.report?.content == "\(account.name)|plan")
                #expect(read.report?.hops.allSaw(account.name) == true)
            }
        }
    }

    @Test("another tenant's document is refused with 403 access-denied (problem JSON, no content); a colleague's is served")
    func crossTenantRead() async throws {
        try await withServices { client in
            #expect(try await client.send(.PUT, "/v1/docs/\(alice.name)/memo", as: alice, body: "\(alice.name)|secret").status == 200)
            let stranger = try await client.send(.GET, "/v1/docs/\(alice.name)/memo", as: carol)
            #expect(stranger.status == 403)
            #expect(stranger.contentType == "application/problem+json")
            #expect(stranger.report?.code == "access-denied")
            #expect(stranger.report?.status == 403)
            #expect(stranger.report?.content == nil)
            #expect(!stranger.text.contains("secret"))
            #expect(stranger.report?.hops.allSaw(carol.name) == true)
            let colleague = try await client.send(.GET, "/v1/docs/\(alice.name)/memo", as: bob)
            #expect(colleague.status == 200)
            #expect(colleague.report?.content == "\(alice.name)|secret")
        }
    }

    @Test("export follows the save-to rules of the caller's policy", arguments: [
        ("onedrive", true, true), ("sharepoint", true, false), ("local", false, true), ("dropbox", false, false),
    ])
    func export(target: String, allowedForT0: Bool, allowedForT1: Bool) async throws {
        try await withServices { client in
            for (account, allowed) in [(alice, allowedForT0), (carol, allowedForT1)] {
                #expect(try await client.send(.PUT, "/v1/docs/\(account.name)/report", as: account, body: "\(account.name)|report").status == 200)
                let answer = try await client.send(.POST, "/v1/docs/\(account.name)/report/export?to=\(target)", as: account)
                let report = try #require(answer.report)
                let copy = "\(client.services.root)/exports/\(target)/\(report.tenant)/\(account.name)-report"
                if allowed {
                    #expect(answer.status == 200)
                    #expect(report.exportedTo == target)
                    #expect(FileManager.default.fileExists(atPath: copy))
                } else {
                    #expect(answer.status == 403)
                    #expect(report.code == "save-to-blocked")
                    #expect(!FileManager.default.fileExists(atPath: copy))
                }
                #expect(report.hops.allSaw(account.name))
            }
        }
    }

    @Test("an account wipes its own data (its documents are gone, the account is blocked); another account's wipe or write is refused")
    func wipe() async throws {
        try await withServices { client in
            #expect(try await client.send(.PUT, "/v1/docs/\(alice.name)/a", as: alice, body: "\(alice.name)|a").status == 200)
            #expect(try await client.send(.PUT, "/v1/docs/\(alice.name)/b", as: alice, body: "\(alice.name)|b").status == 200)
            #expect(try await client.send(.PUT, "/v1/docs/\(bob.name)/a", as: bob, body: "\(bob.name)|a").status == 200)
            let intrusion = try await client.send(.PUT, "/v1/docs/\(alice.name)/a", as: bob, body: "\(bob.name)|overwrite")
            #expect(intrusion.status == 403)
            #expect(intrusion.report?.code == "not-your-account")
            let refused = try await client.send(.DELETE, "/v1/accounts/\(alice.name)", as: bob)
            #expect(refused.status == 403)
            #expect(refused.report?.code == "not-your-account")
            let wiped = try await client.send(.DELETE, "/v1/accounts/\(alice.name)", as: alice)
            #expect(wiped.status == 200)
            #expect(wiped.report?.removedFiles == 2)
            // The files are gone, and the wiped account stays blocked (BlockAccountReason.wiped): the middleware
            // refuses it at admission.
            let folder = "\(client.services.root)/documents/t0.example/\(alice.name)"
            #expect(!FileManager.default.fileExists(atPath: folder + "/a") && !FileManager.default.fileExists(atPath: folder + "/b"))
            let after = try await client.send(.GET, "/v1/docs/\(alice.name)/a", as: alice)
            #expect(after.status == 403)
            #expect(after.text.contains(#""code":"account-blocked""#))
            let bobs = try await client.send(.GET, "/v1/docs/\(bob.name)/a", as: bob)
            #expect(bobs.status == 200)
            #expect(bobs.report?.content == "\(bob.name)|a")
        }
    }

    @Test("the middleware answers before any handler: no token 401, a forged token 401 bad-signature, a replay 401")
    func refusals() async throws {
        try await withServices { client in
            let missing = try await client.send(.GET, "/v1/docs/\(alice.name)/x", as: nil)
            #expect(missing.status == 401)
            #expect(missing.contentType == "application/problem+json")
            #expect(missing.text.contains(#""code":"missing-token""#))
            let forger = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "gateway-1", issuer: "gateway")
            let forged = try forger.sign(account: alice, tenant: "t0.example", audience: "documents")
            let answer = try await client.send(.GET, "/v1/docs/\(alice.name)/x", as: nil, headers: [("x-identity-assertion", forged)])
            #expect(answer.status == 401)
            #expect(answer.text.contains(#""code":"bad-signature""#))
            let token = try client.services.gatewaySigner.sign(account: alice, tenant: "t0.example", audience: "documents")
            _ = try await client.send(.PUT, "/v1/docs/\(alice.name)/once", as: nil, body: "\(alice.name)|once", headers: [("x-identity-assertion", token)])
            let replay = try await client.send(.PUT, "/v1/docs/\(alice.name)/once", as: nil, body: "x", headers: [("x-identity-assertion", token)])
            #expect(replay.status == 401)
            #expect(replay.text.contains(#""code":"replayed-token""#))
        }
    }

    @Test("the audit service logs each call with the verified identity as metadata")
    func auditLog() async throws {
        try await withServices { client in
            let log = try #require(client.services.audit?.log)
            let before = log.total
            #expect(try await client.send(.PUT, "/v1/docs/\(carol.name)/log", as: carol, body: "\(carol.name)|log").status == 200)
            #expect(log.total == before + 1)
            let line = try #require(log.lines.last)
            #expect(line.metadata["identity"] == carol.name)
            #expect(line.metadata["tenant"] == "t1.example")
            #expect(line.metadata["event"] == "write log")
            #expect(log.mismatched == 0)
        }
    }

    @Test("the comparison routes (/plain) take the account from a header and run the same hops")
    func plainRoutes() async throws {
        try await withServices { client in
            let answer = try await client.send(
                .PUT, "/plain/docs/\(bob.name)/p", as: nil, body: "\(bob.name)|p", headers: [("x-identity-account", bob.name)])
            #expect(answer.status == 200)
            #expect(answer.report?.hops.allSaw(bob.name) == true)
            #expect(try await client.send(.PUT, "/plain/docs/\(bob.name)/p", as: nil, body: "x").status == 401)
        }
    }

    @Test("the bare-signature comparison routes (/bare) take the account from a signed token, refuse a forged one, and run the same hops")
    func bareRoutes() async throws {
        try await withServices { client in
            let token = try client.services.gatewaySigner.sign(account: bob, tenant: "t0.example", audience: "documents")
            let answer = try await client.send(
                .PUT, "/bare/docs/\(bob.name)/b", as: nil, body: "\(bob.name)|b", headers: [("x-identity-assertion", token)])
            #expect(answer.status == 200)
            #expect(answer.report?.hops.allSaw(bob.name) == true)
            let forger = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "gateway-1", issuer: "gateway")
            let forged = try forger.sign(account: bob, tenant: "t0.example", audience: "documents")
            #expect(try await client.send(.PUT, "/bare/docs/\(bob.name)/b", as: nil, body: "x", headers: [("x-identity-assertion", forged)]).status == 401)
            #expect(try await client.send(.PUT, "/bare/docs/\(bob.name)/b", as: nil, body: "x").status == 401)
        }
    }

    @Test("the reusable-token routes (/reusable) accept a client's token at every request, refuse a forged one, and run the same hops")
    func reusableRoutes() async throws {
        try await withServices { client in
            let token = try client.services.gatewaySigner.sign(account: bob, tenant: "t0.example", audience: "documents")
            for round in 0..<3 {
                let answer = try await client.send(
                    .PUT, "/reusable/docs/\(bob.name)/r", as: nil, body: "\(bob.name)|r\(round)", headers: [("x-identity-assertion", token)])
                #expect(answer.status == 200)
                #expect(answer.report?.hops.allSaw(bob.name) == true)
            }
            // The same token on the single-use routes: accepted once, then a replay.
            #expect(try await client.send(.GET, "/v1/docs/\(bob.name)/r", as: nil, headers: [("x-identity-assertion", token)]).status == 200)
            #expect(try await client.send(.GET, "/v1/docs/\(bob.name)/r", as: nil, headers: [("x-identity-assertion", token)]).status == 401)
            let forger = IdentityAssertionSigner(key: try AssertionSigningKey(), keyID: "gateway-1", issuer: "gateway")
            let forged = try forger.sign(account: bob, tenant: "t0.example", audience: "documents")
            let refused = try await client.send(.GET, "/reusable/docs/\(bob.name)/r", as: nil, headers: [("x-identity-assertion", forged)])
            #expect(refused.status == 401)
            #expect(refused.text.contains(#""code":"bad-signature""#))
        }
    }

    @Test("the audit service at a URL of its own, as tenant-load runs it in a child process: it sees the caller, and /summary counts its lines")
    func auditElsewhere() async throws {
        let serviceKey = try AssertionSigningKey()
        let audit = AuditService(trustedKey: serviceKey.publicKey)
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let application = audit.application { listening.yield($0) }
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.runService(gracefulShutdownSignals: []) }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let services = try TenantServices(serviceKey: serviceKey, auditURL: "http://127.0.0.1:\(port)")
            #expect(services.audit == nil)
            try await services.withRunningServices { documents, auditURL in
                #expect(auditURL == "http://127.0.0.1:\(port)")
                let client = Client(http: http, base: documents, services: services)
                let answer = try await client.send(.PUT, "/v1/docs/\(carol.name)/far", as: carol, body: "\(carol.name)|far")
                #expect(answer.status == 200)
                #expect(answer.report?.hops.remote == carol.name)
                let response = try await http.execute(HTTPClientRequest(url: auditURL + "/summary"), timeout: .seconds(30))
                let summary = try JSONDecoder().decode(AuditSummary.self, from: Data(buffer: try await response.body.collect(upTo: 1 << 16)))
                #expect(summary.total == 1 && summary.mismatched == 0)
                #expect(summary.lastLine?.contains("identity=\(carol.name)") == true)
            }
            try await services.shutDown()
            group.cancelAll()
        }
        try await http.shutdown()
    }
}
