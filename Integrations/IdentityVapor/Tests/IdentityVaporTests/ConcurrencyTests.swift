import IdentityPolicy
import IdentityRuntime
import IdentityVapor
import Testing
import Vapor
import VaporTesting

/// Sixteen accounts in two tenants (contoso encrypts, fabrikam does not).
let crowd: [Identity] = (0..<16).map { Identity("user\($0)@\($0 % 2 == 0 ? "contoso" : "fabrikam").com") }

@Suite("IdentityMiddleware (Vapor): concurrent requests never see each other's identity")
struct ConcurrencyTests {
    @Test("many concurrent requests for 16 accounts, in memory: each handler sees its own account after every await, in a Task, async let and a task group, with its own policy", arguments: [128, 512])
    func inMemory(requests: Int) async throws {
        let fixture = try Fixture(accounts: crowd)
        let tokens = try (0..<requests).map { try fixture.token(crowd[$0 % crowd.count]) }
        try await fixture.withApplication { app in
            let tester = try app.testing()
            try await withThrowingTaskGroup(of: (Int, TestingHTTPResponse).self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask { (index, try await tester.sendRequest(.GET, "hops", headers: header(token))) }
                }
                for try await (index, response) in group {
                    check(response.status, hopsResult(String(buffer: response.body)), for: crowd[index % crowd.count])
                }
            }
        }
        #expect(fixture.handlerRuns.value == requests)
    }

    @Test("concurrent requests over real connections, mixed with requests without a token, with a forged token and to a public route: each admitted handler sees only its account; the others never run a handler and the public route sees no identity")
    func live() async throws {
        let fixture = try Fixture(accounts: crowd)
        let perAccount = 4
        let tokens = try (0..<(crowd.count * perAccount)).map { try fixture.token(crowd[$0 % crowd.count]) }
        let forged = try fixture.token(crowd[0], forged: true)
        enum Sent { case admitted(Int), anonymous, forged, publicRoute }
        try await fixture.withLiveServer { server in
            try await withThrowingTaskGroup(of: (Sent, ClientResponse).self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask { (.admitted(index), try await server.send(.GET, "hops", headers: header(token))) }
                    if index % 4 == 0 {
                        group.addTask { (.anonymous, try await server.send(.GET, "hops")) }
                        group.addTask { (.forged, try await server.send(.GET, "hops", headers: header(forged))) }
                        group.addTask { (.publicRoute, try await server.send(.GET, "public")) }
                    }
                }
                for try await (sent, response) in group {
                    switch sent {
                    case let .admitted(index):
                        check(response.status, hopsResult(response.text), for: crowd[index % crowd.count])
                    case .anonymous:
                        #expect(response.status == .unauthorized)
                        #expect(response.text.contains(#""code":"missing-token""#))
                    case .forged:
                        #expect(response.status == .unauthorized)
                        #expect(response.text.contains(#""code":"bad-signature""#))
                    case .publicRoute:
                        #expect(response.text == "- -")
                    }
                }
            }
        }
        #expect(fixture.handlerRuns.value == tokens.count)
    }

    @Test("a synchronous handler, concurrently for 16 accounts over real connections: it may run outside the scope (no identity), never under another account")
    func synchronousHandlers() async throws {
        let fixture = try Fixture(accounts: crowd)
        let tokens = try (0..<(crowd.count * 2)).map { try fixture.token(crowd[$0 % crowd.count]) }
        try await fixture.withLiveServer { server in
            try await withThrowingTaskGroup(of: (Int, ClientResponse).self) { group in
                for (index, token) in tokens.enumerated() {
                    group.addTask { (index, try await server.send(.GET, "sync", headers: header(token))) }
                }
                for try await (index, response) in group {
                    let account = crowd[index % crowd.count].name
                    #expect(response.status == .ok)
                    let seen = response.text.split(separator: " ").map(String.init)
                    #expect(seen.first == account)
                    #expect(seen.last == account || seen.last == "-", "\(account)'s synchronous handler ran as \(seen)")
                }
            }
        }
    }

    func check(
        _ status: HTTPResponseStatus, _ result: ([String], String)?, for account: Identity,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(status == .ok, sourceLocation: sourceLocation)
        guard let (seen, policy) = result else {
            Issue.record("no /hops report for \(account)", sourceLocation: sourceLocation)
            return
        }
        #expect(seen.count == 16 && seen.allSatisfy { $0 == account.name }, "\(account) saw \(seen)", sourceLocation: sourceLocation)
        #expect(policy == (account.name.hasSuffix("contoso.com") ? "encrypts" : "clear"), sourceLocation: sourceLocation)
    }
}
