import Foundation
import GRPCCore
import GRPCInProcessTransport
import IdentityAssertions
import IdentityGRPC
import IdentityPolicy
import IdentityRuntime

/// `identity-grpc-bench [--calls N] [--warmup N]`: the latency of one unary call over the in-process transport
/// through both identity interceptors (a reusable bearer token from `ReusableTokenProvider`, a reusable
/// verifier, admission, the handler under the account) against the same call with no interceptors, measured
/// in one run, in alternating batches so that both sides see the same machine. Prints p50 and p90 of each
/// side and the p50 ratio. No threshold: the figure is for the report, not a test.
let arguments = CommandLine.arguments.dropFirst()
func option(_ name: String) -> Int? {
    guard let index = arguments.firstIndex(of: name), arguments.index(after: index) < arguments.endIndex else { return nil }
    return Int(arguments[arguments.index(after: index)])
}
let calls = option("--calls") ?? 20_000
let warmup = option("--warmup") ?? 2_000
let batch = 500

struct Bytes: MessageSerializer, MessageDeserializer {
    func serialize<Output: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Output { Output(message) }
    func deserialize<Input: GRPCContiguousBytes>(_ bytes: Input) throws -> [UInt8] {
        bytes.withUnsafeBytes { Array($0) }
    }
}

/// One unary method that answers the caller's thread identity, as a handler that looks at it would.
struct Echo: RegistrableRPCService {
    static let method = MethodDescriptor(fullyQualifiedService: "bench.Echo", method: "Get", type: .unary)
    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: Self.method, deserializer: Bytes(), serializer: Bytes()) { request, _ in
            let single = try await ServerRequest(stream: request)
            let seen = Array((IdentityContext.currentThreadIdentity?.name ?? "").utf8)
            return StreamingServerResponse(single: ServerResponse(message: single.message + seen))
        }
    }
}

func call(_ client: GRPCClient<InProcessTransport.Client>) async throws -> Int {
    try await client.unary(
        request: ClientRequest(message: [1, 2, 3, 4]), descriptor: Echo.method, serializer: Bytes(),
        deserializer: Bytes(), options: .defaults
    ) { try $0.message.count }
}

func percentile(_ values: [Duration], _ fraction: Double) -> Duration {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func microseconds(_ duration: Duration) -> String {
    String(format: "%.1f µs", seconds(duration) * 1e6)
}

let account: Identity = "alice@contoso.com"
let key = try AssertionSigningKey()
let signer = IdentityAssertionSigner(key: key, keyID: "k1", issuer: "frontend")
let verifier = IdentityAssertionVerifier(
    keys: ["k1": key.publicKey], issuers: ["frontend"], audience: "documents", mode: .reusable)
let policies = PolicyManager(policySource: StaticPolicySource(tenants: [
    "contoso.com": Policy(identity: nil, isFileEncryptionRequired: true),
]))
policies.registerAccount(account)
let tokens = ReusableTokenProvider(signer: signer, audience: "documents")

let plain = InProcessTransport()
let guarded = InProcessTransport()
let clock = ContinuousClock()
var plainTimes: [Duration] = []
var guardedTimes: [Duration] = []
plainTimes.reserveCapacity(calls)
guardedTimes.reserveCapacity(calls)

try await withGRPCServer(transport: plain.server, services: [Echo()]) { _ in
    try await withGRPCServer(
        transport: guarded.server, services: [Echo()],
        interceptors: [IdentityServerInterceptor(verifier: verifier, policies: policies)]
    ) { _ in
        try await withGRPCClient(transport: plain.client) { plainClient in
            try await withGRPCClient(
                transport: guarded.client, interceptors: [IdentityClientInterceptor(tokenProvider: tokens)]
            ) { guardedClient in
                try await IdentityContext.withThreadIdentity(account) {
                    for _ in 0..<warmup {
                        _ = try await call(plainClient)
                        _ = try await call(guardedClient)
                    }
                    // The identity side answers the account's name, the plain side nothing: both really ran.
                    let answered = try await call(guardedClient)
                    precondition(answered == 4 + account.name.utf8.count, "the handler did not run under the account")
                    var done = 0
                    while done < calls {
                        let size = min(batch, calls - done)
                        for _ in 0..<size {
                            let start = clock.now
                            _ = try await call(plainClient)
                            plainTimes.append(clock.now - start)
                        }
                        for _ in 0..<size {
                            let start = clock.now
                            _ = try await call(guardedClient)
                            guardedTimes.append(clock.now - start)
                        }
                        done += size
                    }
                }
            }
        }
    }
}

let plainP50 = percentile(plainTimes, 0.5)
let guardedP50 = percentile(guardedTimes, 0.5)
print("unary call, in-process transport, \(calls) calls each side")
print("  without interceptors: p50 \(microseconds(plainP50)), p90 \(microseconds(percentile(plainTimes, 0.9)))")
print("  both interceptors:    p50 \(microseconds(guardedP50)), p90 \(microseconds(percentile(guardedTimes, 0.9)))")
print(String(format: "  p50 ratio: %.2f", seconds(guardedP50) / seconds(plainP50)))
