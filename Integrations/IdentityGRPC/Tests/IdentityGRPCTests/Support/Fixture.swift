import Foundation
import GRPCCore
import GRPCInProcessTransport
import IdentityAssertions
import IdentityGRPC
import IdentityPolicy
import IdentityRuntime

let alice: Identity = "alice@contoso.com"
let bob: Identity = "bob@contoso.com"
let dave: Identity = "dave@contoso.com"
let carol: Identity = "carol@fabrikam.com"

/// One service under test: keys, a verifier for audience "documents", a policy manager with two tenants
/// (contoso encrypts files, fabrikam does not) and dave blocked, and the probe service behind the server
/// interceptor, reached over the in-process transport.
struct Fixture {
    let signingKey: AssertionSigningKey
    let signer: IdentityAssertionSigner
    let verifier: IdentityAssertionVerifier
    let policies: PolicyManager
    let service = ProbeService()

    /// Contoso encrypts files, fabrikam does not.
    static func tenantPolicies() -> StaticPolicySource {
        StaticPolicySource(tenants: [
            "contoso.com": Policy(identity: nil, isFileEncryptionRequired: true),
            "fabrikam.com": Policy(identity: nil, isFileEncryptionRequired: false),
        ])
    }

    init(mode: IdentityAssertionVerifier.Mode = .singleUse, policySource: (any PolicySource)? = nil) throws {
        signingKey = try AssertionSigningKey()
        signer = IdentityAssertionSigner(key: signingKey, keyID: "k1", issuer: "frontend")
        verifier = IdentityAssertionVerifier(
            keys: ["k1": signingKey.publicKey], issuers: ["frontend"], audience: "documents", mode: mode)
        policies = PolicyManager(policySource: policySource ?? Self.tenantPolicies())
        for account in [alice, bob, dave, carol] { policies.registerAccount(account) }
        policies.blockAccount(dave, reason: .clockedOut)
    }

    var serverInterceptor: IdentityServerInterceptor {
        IdentityServerInterceptor(verifier: verifier, policies: policies)
    }

    /// A single-use assertion of `account`, with its tenant unless another is given.
    func token(_ account: Identity, tenant: String? = nil, audience: String = "documents") throws -> String {
        try signer.sign(account: account, tenant: tenant ?? TenantID.domain(of: account)?.rawValue, audience: audience)
    }

    /// Runs `body` with a client of the probe service: the server has the identity interceptor (unless
    /// `serverInterceptors` says otherwise), the client `clientInterceptors`.
    func withClient<Result: Sendable>(
        serverInterceptors: [any ServerInterceptor]? = nil, clientInterceptors: [any ClientInterceptor] = [],
        _ body: (GRPCClient<InProcessTransport.Client>) async throws -> Result
    ) async throws -> Result {
        let transport = InProcessTransport()
        return try await withGRPCServer(
            transport: transport.server, services: [service], interceptors: serverInterceptors ?? [serverInterceptor]
        ) { _ in
            try await withGRPCClient(transport: transport.client, interceptors: clientInterceptors) { client in
                try await body(client)
            }
        }
    }
}

/// Metadata with `token` under the assertion key.
func assertion(_ token: String) -> Metadata {
    ["x-identity-assertion": .string(token)]
}

/// Metadata with `authorization: Bearer token`.
func bearer(_ token: String) -> Metadata {
    ["authorization": .string("Bearer \(token)")]
}

extension GRPCClient {
    func whoAmI(_ metadata: Metadata = [:], message: String = "hello") async throws -> Report {
        try await unary(
            request: ClientRequest(message: message, metadata: metadata), descriptor: ProbeService.whoAmI,
            serializer: UTF8Coder(), deserializer: JSONCoder<Report>(), options: .defaults
        ) { try $0.message }
    }

    func count(_ count: Int, _ metadata: Metadata = [:]) async throws -> [Report] {
        try await serverStreaming(
            request: ClientRequest(message: String(count), metadata: metadata), descriptor: ProbeService.count,
            serializer: UTF8Coder(), deserializer: JSONCoder<Report>(), options: .defaults
        ) { response in
            var reports: [Report] = []
            for try await report in response.messages { reports.append(report) }
            return reports
        }
    }

    func collect(_ messages: [String], _ metadata: Metadata = [:]) async throws -> [Report] {
        try await clientStreaming(
            request: StreamingClientRequest(metadata: metadata) { writer in
                for message in messages { try await writer.write(message) }
            },
            descriptor: ProbeService.collect, serializer: UTF8Coder(), deserializer: JSONCoder<[Report]>(),
            options: .defaults
        ) { try $0.message }
    }

    func echo(_ messages: [String], _ metadata: Metadata = [:]) async throws -> [Report] {
        try await bidirectionalStreaming(
            request: StreamingClientRequest(metadata: metadata) { writer in
                for message in messages { try await writer.write(message) }
            },
            descriptor: ProbeService.echo, serializer: UTF8Coder(), deserializer: JSONCoder<Report>(),
            options: .defaults
        ) { response in
            var reports: [Report] = []
            for try await report in response.messages { reports.append(report) }
            return reports
        }
    }

    func missing(_ metadata: Metadata) async throws -> String {
        try await unary(
            request: ClientRequest(message: "", metadata: metadata), descriptor: ProbeService.missing,
            serializer: UTF8Coder(), deserializer: UTF8Coder(), options: .defaults
        ) { try $0.message }
    }
}

/// The `RPCError` `body` fails with, or `nil` when it succeeds or fails otherwise.
func rpcError(_ body: () async throws -> some Sendable) async -> RPCError? {
    do {
        _ = try await body()
        return nil
    } catch let error as RPCError {
        return error
    } catch {
        return nil
    }
}
