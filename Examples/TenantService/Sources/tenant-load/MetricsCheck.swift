import AsyncHTTPClient
import Foundation
import IdentityAssertions
import IdentityMetrics
import IdentityRuntime
import NIOCore
import NIOHTTP1
import TenantServiceKit

/// The document service's `GET /metrics`, parsed: each series' value by name and labels.
struct MetricsScrape {
    struct Series {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    let series: [Series]

    static func fetch(client: HTTPClient, baseURL: String) async throws -> MetricsScrape {
        let response = try await client.execute(HTTPClientRequest(url: baseURL + "/metrics"), timeout: .seconds(30))
        guard response.status == .ok else { throw UsageError("GET /metrics: \(response.status)") }
        return MetricsScrape(text: String(buffer: try await response.body.collect(upTo: 16 << 20)))
    }

    /// Reads Prometheus' text format: `name{key="value",...} number` lines; comments skipped.
    init(text: String) {
        var series: [Series] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let key = line[..<space]
            guard let brace = key.firstIndex(of: "{") else {
                series.append(Series(name: String(key), labels: [:], value: value))
                continue
            }
            var labels: [String: String] = [:]
            for pair in key[key.index(after: brace)..<key.index(before: key.endIndex)].split(separator: ",") {
                guard let equals = pair.firstIndex(of: "=") else { continue }
                labels[String(pair[..<equals])] = String(pair[pair.index(after: equals)...].dropFirst().dropLast())
            }
            series.append(Series(name: String(key[..<brace]), labels: labels, value: value))
        }
        self.series = series
    }

    /// The sum of the series named `name` whose labels include `labels`.
    func total(_ name: String, _ labels: [String: String] = [:]) -> Int {
        let matching = series.filter { series in
            series.name == name && labels.allSatisfy { key, value in series.labels[key] == value }
        }
        return Int(matching.map(\.value).reduce(0, +))
    }
}

/// What the driver sent through the identity middleware (`/v1` and `/reusable`), to compare with the metrics.
struct IdentityRequests {
    /// Requests whose token was valid: each must be verified, then admitted, once.
    var admitted = 0
    /// Of those, the reusable tokens' uses after the first per account: each a cache hit.
    var cacheHits = 0

    /// Adds `requests` sent in `mode`: the middleware's modes verify and admit them, the others neither.
    mutating func count(_ requests: Int, mode: Mode) {
        switch mode {
        case .verified: admitted += requests
        case .reusable: admitted += requests; cacheHits += requests
        case .plain, .bare: break
        }
    }
}

/// After the timed rounds: causes refusals of known kinds and counts, then checks that the document service's
/// `/metrics` counted each once, and that every request the run sent through the identity middleware was verified
/// and admitted once. Returns the report's lines and whether everything matched.
struct MetricsCheck {
    let client: HTTPClient
    let baseURL: String
    let services: TenantServices
    /// How many refusals of each kind it causes.
    let count = 8

    func run(sent: IdentityRequests) async throws -> (lines: [String], passed: Bool) {
        let before = try await MetricsScrape.fetch(client: client, baseURL: baseURL)
        let account = Tenants.account(tenant: Tenants.tenantCount - 1, user: Tenants.accountsPerTenant - 1)
        let tenant = Tenants.tenant(Tenants.tenantCount - 1).rawValue
        let signer = services.gatewaySigner
        var statuses: [String: [Int]] = [:]

        // 1. A blocked account with valid tokens: verified, then refused at admission (403).
        services.policies.blockAccount(account, reason: .blockedByAdministrator)
        var used: [String] = []
        for _ in 0..<count {
            let token = try signer.sign(account: account, tenant: tenant, audience: TenantServices.documentsAudience)
            used.append(token)
            statuses["blocked", default: []].append(try await get(account, token: token))
        }
        services.policies.unblockAccount(account, reason: .blockedByAdministrator)
        // 2. The same tokens again: replayed (401), refused before admission.
        for token in used { statuses["replayed", default: []].append(try await get(account, token: token)) }
        // 3. Tokens for another audience (401).
        for _ in 0..<count {
            let token = try signer.sign(account: account, tenant: tenant, audience: TenantServices.auditAudience)
            statuses["wrongAudience", default: []].append(try await get(account, token: token))
        }

        // Blocks and unblocks are counted from the manager's events, a moment later.
        var after = try await MetricsScrape.fetch(client: client, baseURL: baseURL)
        let deadline = ContinuousClock.now + .seconds(10)
        while after.total(IdentityMetricNames.accountUnblocks) <= before.total(IdentityMetricNames.accountUnblocks), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            after = try await MetricsScrape.fetch(client: client, baseURL: baseURL)
        }

        typealias Names = IdentityMetricNames
        func delta(_ name: String, _ labels: [String: String] = [:]) -> Int { after.total(name, labels) - before.total(name, labels) }
        let refusals = delta(Names.admissionRefusals, [
            "code": "2", "cause": "blocked", "block_reason": "blockedByAdministrator", "tenant": tenant,
        ])
        let checks: [(String, Int, Int)] = [
            ("refusals of the blocked account: 403", statuses["blocked"]!.filter { $0 == 403 }.count, count),
            ("replayed tokens: 401", statuses["replayed"]!.filter { $0 == 401 }.count, count),
            ("wrong-audience tokens: 401", statuses["wrongAudience"]!.filter { $0 == 401 }.count, count),
            ("\(Names.admissionRefusals){code=2,cause=blocked,block_reason=blockedByAdministrator,tenant=\(tenant)} +", refusals, count),
            ("\(Names.admissionRefusals) + (all)", delta(Names.admissionRefusals), count),
            ("\(Names.tokenVerifications){outcome=replayed} +", delta(Names.tokenVerifications, ["outcome": "replayed"]), count),
            ("\(Names.tokenVerifications){outcome=wrongAudience} +", delta(Names.tokenVerifications, ["outcome": "wrongAudience"]), count),
            ("\(Names.tokenVerifications) refused + (all)",
             delta(Names.tokenVerifications) - delta(Names.tokenVerifications, ["outcome": "accepted"]), 2 * count),
            ("\(Names.accountBlocks){reason=blockedByAdministrator,tenant=\(tenant)} +",
             delta(Names.accountBlocks, ["reason": "blockedByAdministrator", "tenant": tenant]), 1),
            ("\(Names.accountUnblocks){reason=blockedByAdministrator,tenant=\(tenant)} +",
             delta(Names.accountUnblocks, ["reason": "blockedByAdministrator", "tenant": tenant]), 1),
            // The whole run: every request with a valid token verified once and admitted once (the blocked
            // account's verified too), every reusable token's later use a cache hit.
            ("\(Names.admissions) (the run)", after.total(Names.admissions), sent.admitted),
            ("\(Names.tokenVerifications){outcome=accepted} (the run)",
             after.total(Names.tokenVerifications, ["outcome": "accepted"]), sent.admitted + count),
            ("\(Names.tokenCacheHits) (the run)", after.total(Names.tokenCacheHits), sent.cacheHits),
        ]
        var lines = ["", "| metrics check (GET /metrics) | counted | caused |", "|---|---:|---:|"]
        for (what, counted, caused) in checks {
            lines.append("| \(what) | \(counted) | \(caused)\(counted == caused ? "" : " MISMATCH") |")
        }
        let fetches = after.total(Names.keyFetches), timeouts = after.total(Names.keyFetchTimeouts)
        lines.append("key store: \(fetches) fetches metered, \(timeouts) timeouts")
        let passed = checks.allSatisfy { $0.1 == $0.2 }
        lines.append(passed
            ? "metrics check: every refusal caused counted once (\(3 * count)), every admission counted once (\(sent.admitted))"
            : "metrics check: FAILED")
        return (lines, passed)
    }

    private func get(_ account: Identity, token: String) async throws -> Int {
        var request = HTTPClientRequest(url: baseURL + "/v1/docs/\(account.name)/note")
        request.headers.add(name: "x-identity-assertion", value: token)
        let response = try await client.execute(request, timeout: .seconds(30))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }
}
