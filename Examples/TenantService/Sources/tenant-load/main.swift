// tenant-load: the document service and the audit service on loopback, and a load of requests from 64 accounts
// in 8 tenants at once, WITH the identity middleware and WITHOUT it (/plain: the account taken unverified from
// a header), in one run, interleaved in rounds so that every mode sees the same machine. With the middleware,
// in two token modes:
// - single-use (/v1): a new signed assertion per request, verified in full and used up (replay cache);
// - reusable (/reusable): each account's client keeps one bearer token for the whole run; the service's
//   verifier is in reusable mode (verified in full once, then recognized by its digest).
// A further mode, /bare (a bare Ed25519 check of the token's signature, nothing else), runs beside single-use
// tokens: with / bare is what the middleware costs beyond the signature check that every single-use token needs.
// Every response is checked: the account and the identity at every hop (queue, operation, task, audit service)
// must be the caller's; reads of another tenant's documents must be refused.
//
//     swift run -c release tenant-load                       # 50,000 requests per mode, 4 modes
//     swift run -c release tenant-load --requests 20000      # the CI run, 10,000 per mode
//     options: --requests N (requests of two modes: each mode sends N / 2), --rounds R (default 10),
//              --tokens single-use | reusable | both (default both: which middleware modes run; /plain always),
//              --echo-audit-log, --audit-in-process (the audit service in this process instead of a child process),
//              --database (documents in PostgreSQL too: see below)
//
// --database: the document service keeps documents in PostgreSQL as well (TenantServiceKit's DatabaseDocuments,
// under IdentityPostgres's row-level security), at the server libpq's variables name (PGHOST, PGPORT, PGUSER as a
// superuser, ...; Integrations/IdentityPostgres/scripts/with-postgres.sh starts a throwaway one). It is an
// option, not automatic on PGHOST, so that a run's mix never changes with the environment. Half of every mode's
// requests then go to the /db routes: writes, own, colleague's and other-tenant reads (must be 404: the database
// does not answer another tenant's row), and the unscoped listing (`SELECT tenant, account, name FROM
// tenant_docs.documents`, no WHERE). Every row of every database answer is audited: one of another tenant fails
// the run.
//
//     ../../Integrations/IdentityPostgres/scripts/with-postgres.sh swift run -c release tenant-load --database
//
// The audit service runs in a child process (this executable with --serve-audit KEY --port-file FILE): the
// document service reaches it over loopback with a signed assertion, and it reports its log's counts at
// GET /summary. CPU time per request counts this process only (the driver and the document service).
//
// After the rounds, the metrics check (MetricsCheck.swift): the driver blocks one account and sends it valid tokens
// (refused at admission), replays them, and sends tokens for another audience, then reads the document service's
// GET /metrics (IdentityMetrics through swift-prometheus): every refusal it caused must be counted once, and every
// request it sent through the identity middleware verified and admitted once (reusable tokens: cache hits after the
// first use).
//
// Exit status 1 on any misattribution, cross-tenant read accepted, cross-tenant database row, unexpected answer,
// transport error or metrics mismatch. The
// latency and throughput targets are reported (met / MISSED), not enforced: wall clock on a shared machine.
import AsyncHTTPClient
import Foundation
import IdentityAssertions
import IdentityPostgres
import IdentityRuntime
import TenantServiceKit

struct Options {
    var requests = 100_000
    var rounds = 10
    /// Which token modes run with the middleware: single-use (with the bare check beside it), reusable, or both.
    var tokens: Set<Mode> = [.verified, .reusable]
    var echoAuditLog = false
    /// Run the audit service in this process instead of a child process.
    var auditInProcess = false
    /// Set in the child process: serve the audit service, trusting this public key (hex).
    var serveAudit: String?
    var portFile: String?
    /// Drive the PostgreSQL store too (the `/db` routes), at the server of libpq's variables.
    var database = false

    init(_ arguments: [String]) throws {
        var arguments = arguments[...]
        while let argument = arguments.popFirst() {
            switch argument {
            case "--requests": requests = try Self.number(arguments.popFirst(), argument)
            case "--rounds": rounds = try Self.number(arguments.popFirst(), argument)
            case "--tokens":
                switch arguments.popFirst() {
                case "single-use": tokens = [.verified]
                case "reusable": tokens = [.reusable]
                case "both": tokens = [.verified, .reusable]
                default: throw UsageError("--tokens takes single-use, reusable or both")
                }
            case "--echo-audit-log": echoAuditLog = true
            case "--audit-in-process": auditInProcess = true
            case "--serve-audit": serveAudit = arguments.popFirst()
            case "--port-file": portFile = arguments.popFirst()
            case "--database": database = true
            default: throw UsageError("unknown option \(argument)")
            }
        }
        guard requests >= 2 * 64 * rounds else { throw UsageError("--requests must be at least 128 × --rounds") }
    }

    /// The modes this run sends, in the order of the first round.
    var modes: [Mode] {
        Mode.allCases.filter { mode in
            switch mode {
            case .verified, .reusable: tokens.contains(mode)
            case .plain: true
            case .bare: tokens.contains(.verified)
            }
        }
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
        print("tenant-load: \(error)\nusage: tenant-load [--requests N] [--rounds R] [--tokens single-use|reusable|both] [--audit-in-process] [--echo-audit-log] [--database]")
        return 2
    }
    if let key = options.serveAudit {
        guard let portFile = options.portFile else { print("tenant-load --serve-audit needs --port-file"); return 2 }
        return await serveAudit(trustedKeyHex: key, portFile: portFile, echo: options.echoAuditLog)
    }
    let databaseServer = PostgresFleetConfiguration.fromEnvironment()
    if options.database, databaseServer == nil {
        print("tenant-load: --database needs a PostgreSQL server in PGHOST (and PGPORT, PGUSER, ...): run it under "
              + "Integrations/IdentityPostgres/scripts/with-postgres.sh")
        return 2
    }
    #if DEBUG
    print("note: debug build; run `swift run -c release tenant-load` for meaningful figures")
    #endif
    let accounts = Tenants.accounts.count
    let perWorkerPerRound = max(1, options.requests / 2 / accounts / options.rounds)
    let perMode = perWorkerPerRound * accounts * options.rounds
    let modes = options.modes
    print("tenant-load: \(accounts) accounts in \(Tenants.tenantCount) tenants at once, \(perMode) requests per mode, "
          + "\(modes.count) modes (\(modes.map(\.rawValue).joined(separator: "; "))), \(options.rounds) rounds, "
          + "modes interleaved" + (options.database ? "; half of them to the documents in PostgreSQL (/db)" : ""))
    do {
        // The audit service: a child process (it sees the identity only through the signed assertion) unless
        // --audit-in-process.
        let serviceKey = try AssertionSigningKey()
        let auditProcess = options.auditInProcess ? nil : try await AuditProcess(trusting: serviceKey.publicKey, echo: options.echoAuditLog)
        defer { auditProcess?.stop() }
        if let auditProcess { print("audit service: a separate process at \(auditProcess.url)") }
        let services = try TenantServices(
            echoAuditLog: options.echoAuditLog, serviceKey: serviceKey, auditURL: auditProcess?.url,
            database: options.database ? databaseServer : nil)
        if let documents = services.databaseDocuments {
            print("documents in PostgreSQL: \(DatabaseDocuments.table) in database \(documents.databaseName) at "
                  + "\(databaseServer.map { "\($0.host):\($0.port)" } ?? "-"), as role \(documents.serviceRole)")
        }
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.concurrentHTTP1ConnectionsPerHostSoftLimit = accounts
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = pool
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let status = try await services.withRunningServices { documentsURL, _ in
            let driver = LoadDriver(
                client: client, baseURL: documentsURL, signer: services.gatewaySigner, database: options.database)
            // Setup, untimed: every account writes its "note" (the document the reads and exports ask for), in the
            // database too with --database; then both modes warm up.
            let warmUp = try TokenPool(signer: services.gatewaySigner, perWorker: 16)
            let stores = options.database ? ["/v1/docs", "/v1/db/docs"] : ["/v1/docs"]
            let noteTokens = try TokenPool(signer: services.gatewaySigner, perWorker: stores.count)
            let writes = await withTaskGroup(of: Int.self) { group in
                for (index, account) in Tenants.accounts.enumerated() {
                    group.addTask {
                        var written = 0
                        for store in stores {
                            let token = noteTokens.next(worker: index)
                            var request = HTTPClientRequest(url: documentsURL + "\(store)/\(account.name)/note")
                            request.method = .PUT
                            request.headers.add(name: "x-identity-assertion", value: token ?? "")
                            request.body = .bytes(.init(string: "\(account.name)|note"))
                            let response = try? await client.execute(request, timeout: .seconds(60))
                            _ = try? await response?.body.collect(upTo: 1 << 20)
                            if response?.status == .ok { written += 1 }
                        }
                        return written
                    }
                }
                var ok = 0
                for await written in group { ok += written }
                return ok
            }
            guard writes == accounts * stores.count else {
                print("tenant-load: setup failed, \(writes) of \(accounts * stores.count) notes written")
                return Int32(1)
            }
            // What went through the identity middleware (the notes above, through /v1), for the metrics check.
            var sent = IdentityRequests(admitted: writes)
            // Reusable mode: each account's client signs its token once and keeps it for the whole run (warm-up
            // included: its first use there is the one full verification).
            let keptTokens = try TokenPool(keeping: services.gatewaySigner)
            let bareWarmUp = try TokenPool(signer: services.gatewaySigner, perWorker: 16)
            for mode in modes {
                let warmUpTokens: TokenPool? = switch mode {
                case .verified: warmUp
                case .reusable: keptTokens
                case .bare: bareWarmUp
                case .plain: nil
                }
                let (_, warmUpTally) = await driver.run(mode: mode, sequences: 0..<16, tokens: warmUpTokens)
                sent.count(warmUpTally.requests, mode: mode)
            }
            // Each kept token's first use (in the warm-up) was its one full verification.
            if modes.contains(.reusable) { sent.cacheHits -= accounts }

            let singleUse = modes.contains(.verified)
            if singleUse {
                print("signing 2 × \(perMode) assertions for the single-use and bare modes (the caller's cost, before the clock starts)…")
            }
            let tokens = singleUse ? try TokenPool(signer: services.gatewaySigner, perWorker: perWorkerPerRound * options.rounds) : nil
            let bareTokens = singleUse ? try TokenPool(signer: services.gatewaySigner, perWorker: perWorkerPerRound * options.rounds) : nil
            var results: [Mode: ModeResult] = Dictionary(uniqueKeysWithValues: modes.map { ($0, ModeResult()) })
            for round in 0..<options.rounds {
                let sequences = (round * perWorkerPerRound)..<((round + 1) * perWorkerPerRound)
                // Each mode goes first, second, … equally often.
                let order = modes.indices.map { modes[($0 + round) % modes.count] }
                for mode in round.isMultiple(of: 2) ? order : order.reversed() {
                    let modeTokens: TokenPool? = switch mode {
                    case .verified: tokens
                    case .reusable: keptTokens
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
                    sent.count(tally.requests, mode: mode)
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
            let metricsCheck = try await MetricsCheck(client: client, baseURL: documentsURL, services: services).run(sent: sent)
            return report(results, audit: audit, database: options.database, metricsCheck: metricsCheck)
        }
        try await client.shutdown()
        try await services.shutDown()
        return status
    } catch {
        print("tenant-load: \(error)")
        return 1
    }
}

func report(_ results: [Mode: ModeResult], audit: AuditSummary, database: Bool, metricsCheck: (lines: [String], passed: Bool)) -> Int32 {
    struct Row {
        let throughput, p50, p99, cpuPerRequest: Double
    }
    var rows: [Mode: Row] = [:]
    print("")
    print("| mode | requests | seconds | requests/s | p50 ms | p99 ms | CPU µs/request | cores busy | misattributions | cross-tenant reads accepted | unexpected | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode in Mode.allCases {
        guard let result = results[mode] else { continue }
        let sorted = result.latencies.sorted()
        let row = Row(throughput: Double(result.tally.requests) / result.seconds,
                      p50: percentile(sorted, 0.50), p99: percentile(sorted, 0.99),
                      cpuPerRequest: result.cpuSeconds / Double(max(1, result.tally.requests)))
        rows[mode] = row
        print("| \(mode.rawValue) | \(result.tally.requests) | " + String(format: "%.1f | %.0f | %.2f | %.2f | %.0f | %.2f", result.seconds, row.throughput, row.p50, row.p99, row.cpuPerRequest * 1e6, result.cpuSeconds / result.seconds)
              + " | \(result.tally.misattributions) | \(result.tally.crossTenantReadsAccepted) | \(result.tally.unexpected) | \(result.tally.transportErrors) |")
    }
    func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }
    let without = rows[.plain]!
    for mode in [Mode.verified, .reusable] {
        guard let with = rows[mode] else { continue }
        let throughputRatio = with.throughput / without.throughput
        let p50Ratio = with.p50 / without.p50, p99Ratio = with.p99 / without.p99
        print("")
        print("| \(mode == .verified ? "single-use" : "reusable") tokens: with / without | ratio | target |")
        print("|---|---:|---|")
        print(String(format: "| throughput | %.3f | ≥ 0.95 %@ |", throughputRatio, verdict(throughputRatio >= 0.95)))
        print(String(format: "| p50 latency | %.3f | ≤ 1.05 %@ |", p50Ratio, verdict(p50Ratio <= 1.05)))
        print(String(format: "| p99 latency | %.3f | ≤ 1.05 %@ |", p99Ratio, verdict(p99Ratio <= 1.05)))
        // Not a target: where the throughput goes. CPU time per request counts every thread of this process (the
        // driver and the document service; the audit service too with --audit-in-process), so the difference is
        // what the middleware costs in CPU.
        print(String(format: "| CPU per request (diagnostic) | %.3f | %+.0f µs per request with the middleware |",
                     with.cpuPerRequest / without.cpuPerRequest, (with.cpuPerRequest - without.cpuPerRequest) * 1e6))
    }
    if let with = rows[.verified], let bare = rows[.bare] {
        print("")
        print("| single-use tokens: with / bare signature check (diagnostic: the middleware beyond the signature check) | ratio |")
        print("|---|---:|")
        print(String(format: "| throughput | %.3f |", with.throughput / bare.throughput))
        print(String(format: "| p50 latency | %.3f |", with.p50 / bare.p50))
        print(String(format: "| p99 latency | %.3f |", with.p99 / bare.p99))
        print(String(format: "| CPU per request | %.3f (%+.0f µs) |", with.cpuPerRequest / bare.cpuPerRequest,
                     (with.cpuPerRequest - bare.cpuPerRequest) * 1e6))
    }
    print("")
    print("audit service: \(audit.total) lines logged, \(audit.mismatched) whose identity metadata was not the account served")
    if let line = audit.lastLine { print("  last line: \(line)") }
    var databaseTotal = Tally()
    if database {
        print("")
        print("| documents in PostgreSQL, per mode | reads | listings (no WHERE) | rows audited | rows of another tenant |")
        print("|---|---:|---:|---:|---:|")
        for mode in Mode.allCases {
            guard let tally = results[mode]?.tally else { continue }
            databaseTotal.add(tally)
            print("| \(mode.rawValue) | \(tally.databaseReads) | \(tally.databaseListings) | \(tally.databaseRows) | \(tally.crossTenantRows) |")
        }
        print("database audit: \(databaseTotal.databaseReads) reads and \(databaseTotal.databaseListings) unscoped listings, "
              + "\(databaseTotal.databaseRows) rows audited, \(databaseTotal.crossTenantRows) of another tenant")
    }
    for line in metricsCheck.lines { print(line) }
    var failed = audit.mismatched > 0 || !metricsCheck.passed
    for mode in Mode.allCases {
        guard let tally = results[mode]?.tally else { continue }
        if tally.misattributions + tally.crossTenantReadsAccepted + tally.crossTenantRows + tally.unexpected + tally.transportErrors > 0 {
            failed = true
            print("FAILED (\(mode.rawValue)): " + tally.examples.joined(separator: "; "))
        }
    }
    // A --database run that listed nothing audited nothing: that is a failure too, not a pass.
    if database, databaseTotal.databaseListings == 0 || databaseTotal.databaseReads == 0 {
        failed = true
        print("FAILED: no database read or listing was checked")
    }
    print(failed ? "tenant-load: FAILED" : "tenant-load: every response checked, 0 misattributions, 0 cross-tenant reads accepted"
          + (database ? ", 0 cross-tenant rows in \(databaseTotal.databaseReads + databaseTotal.databaseListings) database answers" : "")
          + ", every identity refusal and admission counted once in /metrics")
    return failed ? 1 : 0
}

exit(await main())
