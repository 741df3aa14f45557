import GRPCCore
import IdentityAssertions
import IdentityGRPC
import IdentityPolicy
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("IdentityServerInterceptor: every streaming shape handles each message under the admitted identity", .exclusiveProcessIdentity)
struct StreamingTests {
    @Test("server streaming: each message is written by the response body under the account, at every hop")
    func serverStreaming() async throws {
        let fixture = try Fixture()
        let reports = try await fixture.withClient { client in try await client.count(4, assertion(try fixture.token(alice))) }
        #expect(reports.map(\.message) == ["0", "1", "2", "3"])
        for report in reports {
            #expect(report.carried == Array(repeating: alice.name, count: 6))
            #expect(report.notCarried == ["-", "-"])
            #expect(report.tenant == "contoso.com")
        }
    }

    @Test("client streaming: each message received is handled under the account, at every hop")
    func clientStreaming() async throws {
        let fixture = try Fixture()
        let reports = try await fixture.withClient { client in
            try await client.collect(["a", "b", "c"], bearer(try fixture.token(carol)))
        }
        #expect(reports.map(\.message) == ["a", "b", "c"])
        for report in reports {
            #expect(report.carried == Array(repeating: carol.name, count: 6))
            #expect(report.notCarried == ["-", "-"])
            #expect(report.policy == "clear")
        }
    }

    @Test("bidirectional streaming: each message is handled and answered under the account, at every hop")
    func bidirectional() async throws {
        let fixture = try Fixture()
        let reports = try await fixture.withClient { client in
            try await client.echo(["x", "y", "z", "w"], assertion(try fixture.token(alice)))
        }
        #expect(reports.map(\.message) == ["x", "y", "z", "w"])
        for report in reports {
            #expect(report.carried == Array(repeating: alice.name, count: 6))
            #expect(report.notCarried == ["-", "-"])
        }
    }

    @Test("a refused streaming call of each shape gets the status and never reaches the handler")
    func refusedStreams() async throws {
        let fixture = try Fixture()
        let errors = try await fixture.withClient { client in
            [await rpcError { try await client.count(2, [:]) },
             await rpcError { try await client.collect(["a"], assertion(try fixture.token(dave))) },
             await rpcError { try await client.echo(["a"], bearer("garbage")) }]
        }
        #expect(errors.map(\.?.code) == [.unauthenticated, .permissionDenied, .unauthenticated])
        #expect(errors.map { $0.flatMap(IdentityProblem.init)?.code } == ["missing-token", "account-blocked", "malformed-token"])
        #expect(fixture.service.runs.value == 0)
    }

    @Test("two tenants' bidirectional streams interleaved message by message on one connection: each message is handled under its own stream's account", arguments: [1, 6])
    func interleavedTenants(rounds: Int) async throws {
        let fixture = try Fixture()
        let interceptor = IdentityClientInterceptor(signer: fixture.signer, audience: "documents", tenant: { TenantID.domain(of: $0)?.rawValue })
        try await fixture.withClient(clientInterceptors: [interceptor]) { client in
            let (aliceIn, aliceInput) = AsyncStream.makeStream(of: String.self)
            let (carolIn, carolInput) = AsyncStream.makeStream(of: String.self)
            let (aliceOut, aliceOutput) = AsyncStream.makeStream(of: Report.self)
            let (carolOut, carolOutput) = AsyncStream.makeStream(of: Report.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (account, input, output) in [(alice, aliceIn, aliceOutput), (carol, carolIn, carolOutput)] {
                    group.addTask {
                        try await IdentityContext.withThreadIdentity(account) {
                            try await client.bidirectionalStreaming(
                                request: StreamingClientRequest { writer in
                                    for await message in input { try await writer.write(message) }
                                },
                                descriptor: ProbeService.echo, serializer: UTF8Coder(),
                                deserializer: JSONCoder<Report>(), options: .defaults
                            ) { response in
                                for try await report in response.messages { output.yield(report) }
                                output.finish()
                            }
                        }
                    }
                }
                var aliceReplies = aliceOut.makeAsyncIterator()
                var carolReplies = carolOut.makeAsyncIterator()
                for round in 0..<rounds {
                    aliceInput.yield("alice-\(round)")
                    let fromAlice = await aliceReplies.next()
                    carolInput.yield("carol-\(round)")
                    let fromCarol = await carolReplies.next()
                    #expect(fromAlice?.message == "alice-\(round)")
                    #expect(fromAlice?.carried == Array(repeating: alice.name, count: 6))
                    #expect(fromCarol?.message == "carol-\(round)")
                    #expect(fromCarol?.carried == Array(repeating: carol.name, count: 6))
                }
                aliceInput.finish()
                carolInput.finish()
                try await group.waitForAll()
            }
        }
        #expect(fixture.service.runs.value == 2)
    }
}
