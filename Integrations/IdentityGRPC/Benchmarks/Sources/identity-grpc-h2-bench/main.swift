import Dispatch
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import IdentityAssertions
import IdentityGRPC
import IdentityPolicy
import IdentityRuntime

/// `identity-grpc-h2-bench [--calls N] [--rounds R] [--warmup N]`: the latency of one unary call over HTTP/2 on
/// loopback (grpc-swift-nio-transport's `HTTP2ServerTransport.Posix` and `HTTP2ClientTransport.Posix`, plaintext,
/// server and client in this process) through both identity interceptors (a reusable bearer token from
/// `ReusableTokenProvider`, a reusable verifier, admission, the handler under the account) against the same call
/// to a server without them, measured in one run: `R` rounds (default 9), each `N` calls of one side then `N` of
/// the other (the side that starts alternates), so that both sides see the same machine. Prints each side's p50
/// and p99 as the median over the rounds, and the median of the rounds' p50 and p99 ratios. No threshold: the
/// figure is for the report, not a test.
///
/// The program's entry point is synchronous (it waits for a task), as the in-process bench's is.
let arguments = CommandLine.arguments.dropFirst()
func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), arguments.index(after: index) < arguments.endIndex else { return nil }
    return arguments[arguments.index(after: index)]
}
let calls = option("--calls").flatMap(Int.init) ?? 2_000
let rounds = max(1, option("--rounds").flatMap(Int.init) ?? 9)
let warmup = option("--warmup").flatMap(Int.init) ?? 2_000

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

func call(_ client: GRPCClient<HTTP2ClientTransport.Posix>) async throws -> Int {
    try await client.unary(
        request: ClientRequest(message: [1, 2, 3, 4]), descriptor: Echo.method, serializer: Bytes(),
        deserializer: Bytes(), options: .defaults
    ) { try $0.message.count }
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

func nanoseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
}

/// `count` calls, each timed (ns).
func timedCalls(_ count: Int, _ client: GRPCClient<HTTP2ClientTransport.Posix>) async throws -> [Double] {
    let clock = ContinuousClock()
    var times: [Double] = []
    times.reserveCapacity(count)
    for _ in 0..<count {
        let start = clock.now
        _ = try await call(client)
        times.append(nanoseconds(clock.now - start))
    }
    return times
}

struct Round {
    var plain: (p50: Double, p99: Double)
    var guarded: (p50: Double, p99: Double)
}

/// The port a server transport listens on (the system chose it).
func port(of server: HTTP2ServerTransport.Posix) async throws -> Int {
    guard let port = try await server.listeningAddress.ipv4?.port else { preconditionFailure("the server does not listen on IPv4") }
    return port
}

func run() async throws -> [Round] {
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
    // Port 0: the system picks free ports, read back once the servers listen.
    let plainServer = HTTP2ServerTransport.Posix(address: .ipv4(host: "127.0.0.1", port: 0), transportSecurity: .plaintext)
    let guardedServer = HTTP2ServerTransport.Posix(address: .ipv4(host: "127.0.0.1", port: 0), transportSecurity: .plaintext)
    var results: [Round] = []

    try await withGRPCServer(transport: plainServer, services: [Echo()]) { _ in
        try await withGRPCServer(
            transport: guardedServer, services: [Echo()],
            interceptors: [IdentityServerInterceptor(verifier: verifier, policies: policies)]
        ) { _ in
            let plainPort = try await port(of: plainServer)
            let guardedPort = try await port(of: guardedServer)
            let plainTransport = try HTTP2ClientTransport.Posix(
                target: .ipv4(address: "127.0.0.1", port: plainPort), transportSecurity: .plaintext)
            let guardedTransport = try HTTP2ClientTransport.Posix(
                target: .ipv4(address: "127.0.0.1", port: guardedPort), transportSecurity: .plaintext)
            try await withGRPCClient(transport: plainTransport) { plainClient in
                try await withGRPCClient(
                    transport: guardedTransport, interceptors: [IdentityClientInterceptor(tokenProvider: tokens)]
                ) { guardedClient in
                    try await IdentityContext.withThreadIdentity(account) {
                        for _ in 0..<warmup {
                            _ = try await call(plainClient)
                            _ = try await call(guardedClient)
                        }
                        // The identity side answers the account's name, the plain side nothing: both really ran.
                        let answered = try await call(guardedClient)
                        precondition(answered == 4 + account.name.utf8.count, "the handler did not run under the account")
                        for round in 0..<rounds {
                            var plainTimes: [Double] = []
                            var guardedTimes: [Double] = []
                            if round.isMultiple(of: 2) {
                                plainTimes = try await timedCalls(calls, plainClient)
                                guardedTimes = try await timedCalls(calls, guardedClient)
                            } else {
                                guardedTimes = try await timedCalls(calls, guardedClient)
                                plainTimes = try await timedCalls(calls, plainClient)
                            }
                            results.append(Round(
                                plain: (percentile(plainTimes, 0.5), percentile(plainTimes, 0.99)),
                                guarded: (percentile(guardedTimes, 0.5), percentile(guardedTimes, 0.99))))
                        }
                    }
                }
            }
        }
    }
    return results
}

// A synchronous entry point that waits for the task (see above).
nonisolated(unsafe) var outcome: Result<[Round], any Error> = .success([])
let finished = DispatchSemaphore(value: 0)
Task.detached {
    do { outcome = .success(try await run()) } catch { outcome = .failure(error) }
    finished.signal()
}
finished.wait()
let measured = try outcome.get()
func microseconds(_ nanoseconds: Double) -> String { String(format: "%.1f µs", nanoseconds / 1_000) }
print("unary call, HTTP/2 on loopback (plaintext): \(rounds) rounds of \(calls) calls each side (medians over the rounds)")
print("  without interceptors: p50 \(microseconds(median(measured.map(\.plain.p50)))), p99 \(microseconds(median(measured.map(\.plain.p99))))")
print("  both interceptors:    p50 \(microseconds(median(measured.map(\.guarded.p50)))), p99 \(microseconds(median(measured.map(\.guarded.p99))))")
print(String(
    format: "  ratio: p50 %.3f, p99 %.3f", median(measured.map { $0.guarded.p50 / $0.plain.p50 }),
    median(measured.map { $0.guarded.p99 / $0.plain.p99 })))
