// tenant-load: the document service and the audit service on loopback, and a load of requests from 64 accounts
// in 8 tenants at once, WITH the identity middleware (/v1: a signed assertion per request, verified and
// admitted) and WITHOUT it (/plain: the account taken unverified from a header), in one run, interleaved in
// rounds so that both modes see the same machine. A third mode, /bare (a bare Ed25519 check of the token's
// signature, nothing else), runs in the same rounds: with / bare is what the middleware costs beyond the
// signature check that any signed identity needs. Every response is checked: the account and the identity at
// every hop (queue, operation, task, audit service) must be the caller's; reads of another tenant's documents
// must be refused.
//
//     swift run -c release tenant-load                       # 100,000 requests with and without (50,000 each),
//                                                            # + 50,000 with the bare check
//     swift run -c release tenant-load --requests 20000      # the CI run, about a minute
//     options: --requests N (with and without together), --rounds R (default 10), --echo-audit-log,
//              --audit-in-process (the audit service in this process instead of a child process)
//
// The audit service runs in a child process (this executable with --serve-audit KEY --port-file FILE): the
// document service reaches it over loopback with a signed assertion, and it reports its log's counts at
// GET /summary. CPU time per request counts this process only (the driver and the document service).
//
// Exit status 1 on any misattribution, cross-tenant read accepted, unexpected answer or transport error. The
// latency and throughput targets are reported (met / MISSED), not enforced: wall clock on a shared machine.
import AsyncHTTPClient
import Foundation
import IdentityAssertions
import IdentityRuntime
import TenantServiceKit

struct Options {
    var requests = 100_000
    var rounds = 10
    var echoAuditLog = false
    /// Run the audit service in this process instead of a child process.
    var auditInProcess = false
    /// Set in the child process: serve the audit service, trusting this public key (hex).
    var serveAudit: String?
    var portFile: String?

    init(_ arguments: [String]) throws {
        var arguments = arguments[...]
        while let argument = arguments.popFirst() {
            switch argument {
            case "--requests": requests = try Self.number(arguments.popFirst(), argument)
            case "--rounds": rounds = try Self.number(arguments.popFirst(), argument)
            case "--echo-audit-log": echoAuditLog = true
            case "--audit-in-process": auditInProcess = true
            case "--serve-audit": serveAudit = arguments.popFirst()
            case "--port-file": portFile = arguments.popFirst()
            default: throw UsageError("unknown option \(argument)")
            }
        }
        guard requests >= 2 * 64 * rounds else { throw UsageError("--requests must be at least 128 × --rounds") }
    }

    static func number(_ text: String?, _ option: String) throws -> Int {
        guard let text, let value = Int(text), value > 0 else { throw UsageError("\(option) takes a positive number") }
        return value
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The CPU time this process has used, all threads, in seconds.
func processCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

func percentile(_ sorted: [UInt64], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
    return Double(sorted[max(0, index)]) / 1_000_000
}

struct ModeResult {
    var latencies: [UInt64] = []
    var seconds = 0.0
    /// CPU time of this process (every thread: the driver and the document service, and the audit service when
    /// it runs in this process) while this mode ran.
    var cpuSeconds = 0.0
    var tally = Tally()
}

func main() async -> Int32 {
    let options: Options
    do { options = try Options(Array(CommandLine.arguments.dropFirst())) } catch {
        print("tenant-load: \(error)\nusage: tenant-load [--requests N] [--rounds R] [--audit-in-process] [--echo-audit-log]")
        return 2
    }
    if let key = options.serveAudit {
        guard let portFile = options.portFile else { print("tenant-load --serve-audit needs --port-file"); return 2 }
        return await serveAudit(trustedKeyHex: key, portFile: portFile, echo: options.echoAuditLog)
    }
    #if DEBUG
    print("note: debug build; run `swift run -c release tenant-load` for meaningful figures")
    #endif
    let accounts = Tenants.accounts.count
    let perWorkerPerRound = max(1, options.requests / 2 / accounts / options.rounds)
    let perMode = perWorkerPerRound * accounts * options.rounds
    print("tenant-load: \(accounts) accounts in \(Tenants.tenantCount) tenants at once, \(perMode) requests per mode "
          + "(\(2 * perMode) with and without the middleware, \(perMode) more with the bare check), \(options.rounds) rounds, "
          + "modes interleaved")
    do {
        // The audit service: a child process (it sees the identity only through the signed assertion) unless
        // --audit-in-process.
        let serviceKey = try AssertionSigningKey()
        let auditProcess = options.auditInProcess ? nil : try await AuditProcess(trusting: serviceKey.publicKey, echo: options.echoAuditLog)
        defer { auditProcess?.stop() }
        if let auditProcess { print("audit service: a separate process at \(auditProcess.url)") }
        let services = try TenantServices(echoAuditLog: options.echoAuditLog, serviceKey: serviceKey, auditURL: auditProcess?.url)
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.concurrentHTTP1ConnectionsPerHostSoftLimit = accounts
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = pool
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let status = try await services.withRunningServices { documentsURL, _ in
            let driver = LoadDriver(client: client, baseURL: documentsURL, signer: services.gatewaySigner)
            // Setup, untimed: every account writes its "note" (the document the reads and exports ask for);
            // then both modes warm up.
            let warmUp = try TokenPool(signer: services.gatewaySigner, perWorker: 16)
            let noteTokens = try TokenPool(signer: services.gatewaySigner, perWorker: 1)
            let writes = await withTaskGroup(of: Bool.self) { group in
                for (index, account) in Tenants.accounts.enumerated() {
                    group.addTask {
                        let token = noteTokens.next(worker: index)
                        var request = HTTPClientRequest(url: documentsURL + "/v1/docs/\(account.name)/note")
                        request.method = .PUT
                        request.headers.add(name: "x-identity-assertion", value: token ?? "")
                        request.body = .bytes(.init(string: "\(account.name)|note"))
                        let response = try? await client.execute(request, timeout: .seconds(60))
                        _ = try? await response?.body.collect(upTo: 1 << 20)
                        return response?.status == .ok
                    }
                }
                var ok = 0
                for await written in group where written { ok += 1 }
                return ok
            }
            guard writes == accounts else {
                print("tenant-load: setup failed, \(writes) of \(accounts) notes written")
                return Int32(1)
            }
            let bareWarmUp = try TokenPool(signer: services.gatewaySigner, perWorker: 16)
            _ = await driver.run(mode: .verified, sequences: 0..<16, tokens: warmUp)
            _ = await driver.run(mode: .plain, sequences: 0..<16, tokens: nil)
            _ = await driver.run(mode: .bare, sequences: 0..<16, tokens: bareWarmUp)

            print("signing 2 × \(perMode) assertions for the verified and bare modes (the caller's cost, before the clock starts)…")
            let tokens = try TokenPool(signer: services.gatewaySigner, perWorker: perWorkerPerRound * options.rounds)
            let bareTokens = try TokenPool(signer: services.gatewaySigner, perWorker: perWorkerPerRound * options.rounds)
            var results: [Mode: ModeResult] = [.verified: ModeResult(), .plain: ModeResult(), .bare: ModeResult()]
            for round in 0..<options.rounds {
                let sequences = (round * perWorkerPerRound)..<((round + 1) * perWorkerPerRound)
                // Each mode goes first, second and third equally often.
                let order = Mode.allCases.indices.map { Mode.allCases[($0 + round) % Mode.allCases.count] }
                for mode in round.isMultiple(of: 2) ? order : order.reversed() {
                    let modeTokens: TokenPool? = switch mode {
                    case .verified: tokens
                    case .bare: bareTokens
                    case .plain: nil
                    }
                    let start = DispatchTime.now().uptimeNanoseconds, cpuStart = processCPUSeconds()
                    let (latencies, tally) = await driver.run(mode: mode, sequences: sequences, tokens: modeTokens)
                    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                    results[mode]!.latencies += latencies
                    results[mode]!.seconds += seconds
                    results[mode]!.cpuSeconds += processCPUSeconds() - cpuStart
                    results[mode]!.tally.add(tally)
                }
                print("  round \(round + 1)/\(options.rounds) done")
            }
            let audit: AuditSummary
            if let auditProcess {
                audit = try await auditProcess.summary(client: client)
            } else if let log = services.audit?.log {
                audit = AuditSummary(total: log.total, mismatched: log.mismatched, lastLine: log.lines.last?.text)
            } else {
                throw UsageError("no audit service")
            }
            return report(results, audit: audit)
        }
        try await client.shutdown()
        try await services.shutDown()
        return status
    } catch {
        print("tenant-load: \(error)")
        return 1
    }
}

func report(_ results: [Mode: ModeResult], audit: AuditSummary) -> Int32 {
    struct Row {
        let throughput, p50, p99, cpuPerRequest: Double
    }
    var rows: [Mode: Row] = [:]
    print("")
    print("| mode | requests | seconds | requests/s | p50 ms | p99 ms | CPU µs/request | cores busy | misattributions | cross-tenant reads accepted | unexpected | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode in Mode.allCases {
        let result = results[mode]!
        let sorted = result.latencies.sorted()
        let row = Row(throughput: Double(result.tally.requests) / result.seconds,
                      p50: percentile(sorted, 0.50), p99: percentile(sorted, 0.99),
                      cpuPerRequest: result.cpuSeconds / Double(max(1, result.tally.requests)))
        rows[mode] = row
        print("| \(mode.rawValue) | \(result.tally.requests) | " + String(format: "%.1f | %.0f | %.2f | %.2f | %.0f | %.2f", result.seconds, row.throughput, row.p50, row.p99, row.cpuPerRequest * 1e6, result.cpuSeconds / result.seconds)
              + " | \(result.tally.misattributions) | \(result.tally.crossTenantReadsAccepted) | \(result.tally.unexpected) | \(result.tally.transportErrors) |")
    }
    let with = rows[.verified]!, without = rows[.plain]!, bare = rows[.bare]!
    let throughputRatio = with.throughput / without.throughput
    let p50Ratio = with.p50 / without.p50, p99Ratio = with.p99 / without.p99
    func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }
    print("")
    print("| with / without | ratio | target |")
    print("|---|---:|---|")
    print(String(format: "| throughput | %.3f | ≥ 0.95 %@ |", throughputRatio, verdict(throughputRatio >= 0.95)))
    print(String(format: "| p50 latency | %.3f | ≤ 1.05 %@ |", p50Ratio, verdict(p50Ratio <= 1.05)))
    print(String(format: "| p99 latency | %.3f | ≤ 1.05 %@ |", p99Ratio, verdict(p99Ratio <= 1.05)))
    // Not a target: where the throughput goes. CPU time per request counts every thread of this process (the
    // driver and the document service; the audit service too with --audit-in-process), so the difference is
    // what the middleware costs in CPU.
    print(String(format: "| CPU per request (diagnostic) | %.3f | +%.0f µs per request with the middleware |",
                 with.cpuPerRequest / without.cpuPerRequest, (with.cpuPerRequest - without.cpuPerRequest) * 1e6))
    print("")
    print("| with / bare signature check (diagnostic: the middleware beyond the signature check) | ratio |")
    print("|---|---:|")
    print(String(format: "| throughput | %.3f |", with.throughput / bare.throughput))
    print(String(format: "| p50 latency | %.3f |", with.p50 / bare.p50))
    print(String(format: "| p99 latency | %.3f |", with.p99 / bare.p99))
    print(String(format: "| CPU per request | %.3f (%+.0f µs) |", with.cpuPerRequest / bare.cpuPerRequest,
                 (with.cpuPerRequest - bare.cpuPerRequest) * 1e6))
    print("")
    print("audit service: \(audit.total) lines logged, \(audit.mismatched) whose identity metadata was not the account served")
    if let line = audit.lastLine { print("  last line: \(line)") }
    var failed = audit.mismatched > 0
    for mode in Mode.allCases {
        let tally = results[mode]!.tally
        if tally.misattributions + tally.crossTenantReadsAccepted + tally.unexpected + tally.transportErrors > 0 {
            failed = true
            print("FAILED (\(mode.rawValue)): " + tally.examples.joined(separator: "; "))
        }
    }
    print(failed ? "tenant-load: FAILED" : "tenant-load: every response checked, 0 misattributions, 0 cross-tenant reads accepted")
    return failed ? 1 : 0
}

exit(await main())
