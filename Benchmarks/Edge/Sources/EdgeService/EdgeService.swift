// What both servers of the wrk benchmark (run.sh) share: the routes, the body, the accounts and their tokens.
//
//     GET /baseline/hello  a handler that returns a small JSON body (a segment as long as "identity", so
//                          that both routes cost the router the same)
//     GET /identity/hello  the same handler behind the framework's IdentityMiddleware (reusable bearer tokens)
//
// 64 accounts in 8 tenants (user-J@tenant-K.example), each with one bearer token signed at start (one hour),
// written one per line to the tokens file for wrk's Lua script; the verifier is in reusable mode, so every token
// is verified in full once and then answered from the token cache. Every tenant has a policy and every account
// is registered under its tenant, so the tenant check and admission look the account up as a service's do.
import Foundation
import IdentityAssertions
import IdentityPolicy
import IdentityRuntime

/// The server's command line: `--port N --tokens FILE`.
public struct EdgeOptions: Sendable {
    public var port = 18080
    public var tokens = "/tmp/identity-edge-tokens"

    public init(_ arguments: [String]) {
        var arguments = arguments[...]
        while let argument = arguments.popFirst() {
            switch (argument, arguments.popFirst()) {
            case ("--port", let value?) where Int(value) != nil: port = Int(value)!
            case ("--tokens", let value?): tokens = value
            default:
                FileHandle.standardError.write(Data("usage: \(CommandLine.arguments[0]) --port N --tokens FILE\n".utf8))
                exit(2)
            }
        }
    }
}

/// The keys, the reusable-token verifier, 64 registered accounts in 8 tenants with their policies, and a bearer
/// token for each account.
public struct EdgeService: Sendable {
    public let verifier: IdentityAssertionVerifier
    public let policies: PolicyManager
    public let tokens: [String]

    /// The handler's answer on both routes.
    public static let body = #"{"status":"ok","items":[1,2,3]}"#

    public init() throws {
        let key = try AssertionSigningKey()
        let signer = IdentityAssertionSigner(key: key, keyID: "edge-1", issuer: "gateway")
        verifier = IdentityAssertionVerifier(
            keys: ["edge-1": key.publicKey], issuers: ["gateway"], audience: "edge", mode: .reusable)
        var tenantPolicies: [TenantID: Policy] = [:]
        for tenant in 0..<8 {
            tenantPolicies[TenantID("tenant-\(tenant).example")] =
                Policy(identity: nil, isFileEncryptionRequired: tenant.isMultiple(of: 2))
        }
        policies = PolicyManager(policySource: StaticPolicySource(tenants: tenantPolicies))
        var tokens: [String] = []
        for tenant in 0..<8 {
            for user in 0..<8 {
                let account = Identity("user-\(user)@tenant-\(tenant).example")
                policies.registerAccount(account, tenantID: TenantID("tenant-\(tenant).example"))
                tokens.append(try signer.sign(
                    account: account, tenant: "tenant-\(tenant).example", audience: "edge", lifetime: 3_600))
            }
        }
        self.tokens = tokens
    }

    /// Writes the tokens, one per line, for wrk's script.
    public func writeTokens(to path: String) throws {
        try (tokens.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }
}
