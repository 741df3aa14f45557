import AsyncHTTPClient
import Foundation
import IdentityAssertions
import IdentityRuntime
import NIOCore
import NIOHTTP1
import Synchronization
import TenantServiceKit

/// One request of the plan, and what its response must say.
struct PlannedRequest: Sendable {
    enum Kind: String, Sendable, CaseIterable {
        case write, readOwn, readColleague, readOtherTenant, export
        /// `GET /db/docs`: the unscoped listing (in the database half of a run with `--database`).
        case list
    }

    let kind: Kind
    let method: HTTPMethod
    let path: String
    let body: String?
    /// The status the response must have.
    let expectedStatus: Int
    /// For a successful read: whose document it is (its content starts with that name).
    let expectedOwner: String?
    /// Whether it goes to the PostgreSQL store (the `/db` routes).
    let usesDatabase: Bool

    /// Request `sequence` of the worker of `account` (tenant `tenant`, user `user`): a fixed mix, the same in
    /// every mode. With `database`, every other block of 8 requests of a worker goes to the `/db` routes instead
    /// (alternating between workers, so that every round has both): writes, own, colleague's and other-tenant
    /// reads as for files, and the unscoped listing in place of the export.
    init(sequence: Int, tenant: Int, user: Int, database: Bool = false) {
        if database, !(sequence / 8 + user).isMultiple(of: 2) {
            self.init(databaseSequence: sequence, tenant: tenant, user: user)
        } else {
            self.init(fileSequence: sequence, tenant: tenant, user: user)
        }
    }

    /// A request of the file routes.
    private init(fileSequence sequence: Int, tenant: Int, user: Int) {
        usesDatabase = false
        let me = Tenants.account(tenant: tenant, user: user).name
        switch sequence % 8 {
        case 0, 4:
            kind = .write
            method = .PUT
            path = "/docs/\(me)/doc-\(sequence % 4)"
            body = "\(me)|\(sequence)"
            expectedStatus = 200
            expectedOwner = nil
        case 2:
            let colleague = Tenants.account(tenant: tenant, user: (user + 1) % Tenants.accountsPerTenant).name
            kind = .readColleague
            method = .GET
            path = "/docs/\(colleague)/note"
            body = nil
            expectedStatus = 200
            expectedOwner = colleague
        case 3:
            let stranger = Tenants.account(tenant: (tenant + 1) % Tenants.tenantCount, user: user).name
            kind = .readOtherTenant
            method = .GET
            path = "/docs/\(stranger)/note"
            body = nil
            expectedStatus = 403
            expectedOwner = nil
        case 6:
            let target = ExportTarget.allCases[(sequence / 8) % ExportTarget.allCases.count]
            kind = .export
            method = .POST
            path = "/docs/\(me)/note/export?to=\(target.rawValue)"
            body = nil
            // The tenant's rule (see Tenants): even tenants save to OneDrive and SharePoint, odd ones to OneDrive
            // and the local drive; the service asks the account's policy from the request context.
            let allowed: Set<ExportTarget> = Tenants.encryptsFiles(tenant: tenant) ? [.onedrive, .sharepoint] : [.onedrive, .local]
            expectedStatus = allowed.contains(target) ? 200 : 403
            expectedOwner = nil
        default:
            kind = .readOwn
            method = .GET
            path = "/docs/\(me)/note"
            body = nil
            expectedStatus = 200
            expectedOwner = me
        }
    }

    /// The database counterpart of request `sequence`. Every account's `note` is in the database too (written
    /// before the run), so another tenant's is there, and must not be found: 404 `not-found`.
    private init(databaseSequence sequence: Int, tenant: Int, user: Int) {
        let me = Tenants.account(tenant: tenant, user: user).name
        var method = HTTPMethod.GET, body: String? = nil, expectedStatus = 200, expectedOwner: String? = nil
        switch sequence % 8 {
        case 0, 4:
            kind = .write
            method = .PUT
            path = "/db/docs/\(me)/doc-\(sequence % 4)"
            body = "\(me)|\(sequence)"
        case 2:
            let colleague = Tenants.account(tenant: tenant, user: (user + 1) % Tenants.accountsPerTenant).name
            kind = .readColleague
            path = "/db/docs/\(colleague)/note"
            expectedOwner = colleague
        case 3:
            let stranger = Tenants.account(tenant: (tenant + 1) % Tenants.tenantCount, user: user).name
            kind = .readOtherTenant
            path = "/db/docs/\(stranger)/note"
            expectedStatus = 404
        case 6:
            kind = .list
            path = "/db/docs"
        default:
            kind = .readOwn
            path = "/db/docs/\(me)/note"
            expectedOwner = me
        }
        self.method = method
        self.body = body
        self.expectedStatus = expectedStatus
        self.expectedOwner = expectedOwner
        usesDatabase = true
    }
}

/// What the driver counts.
struct Tally: Sendable {
    var requests = 0
    var misattributions = 0
    var crossTenantReadsAccepted = 0
    var unexpected = 0
    var transportErrors = 0
    /// Answers of the `/db` routes: reads (`GET /db/docs/:owner/:name`), listings (`GET /db/docs`), the rows
    /// their reports listed (writes' too), and how many of those rows were another tenant's.
    var databaseReads = 0
    var databaseListings = 0
    var databaseRows = 0
    var crossTenantRows = 0
    var examples: [String] = []

    mutating func add(_ other: Tally) {
        requests += other.requests
        misattributions += other.misattributions
        crossTenantReadsAccepted += other.crossTenantReadsAccepted
        unexpected += other.unexpected
        transportErrors += other.transportErrors
        databaseReads += other.databaseReads
        databaseListings += other.databaseListings
        databaseRows += other.databaseRows
        crossTenantRows += other.crossTenantRows
        examples += other.examples.prefix(max(0, 5 - examples.count))
    }

    mutating func note(_ example: String) {
        if examples.count < 5 { examples.append(example) }
    }
}

enum Mode: String, Sendable, CaseIterable {
    case verified = "with IdentityMiddleware, single-use tokens"
    case reusable = "with IdentityMiddleware, reusable tokens"
    case plain = "without (plain header)"
    case bare = "bare signature check"

    var prefix: String {
        switch self {
        case .verified: "/v1"
        case .reusable: "/reusable"
        case .plain: "/plain"
        case .bare: "/bare"
        }
    }
}

/// Sends requests as 64 accounts at once (one worker per account, each with one request in flight) and checks
/// every response.
struct LoadDriver: Sendable {
    let client: HTTPClient
    let baseURL: String
    let signer: IdentityAssertionSigner
    /// Whether half of the requests go to the `/db` routes.
    var database = false

    /// Sends `sequences` (per worker) in `mode`; returns the latencies (ns) and the tally.
    func run(mode: Mode, sequences: Range<Int>, tokens: TokenPool?) async -> ([UInt64], Tally) {
        await withTaskGroup(of: ([UInt64], Tally).self) { group in
            for (index, account) in Tenants.accounts.enumerated() {
                let tenant = index / Tenants.accountsPerTenant, user = index % Tenants.accountsPerTenant
                group.addTask {
                    var latencies: [UInt64] = []
                    latencies.reserveCapacity(sequences.count)
                    var tally = Tally()
                    for sequence in sequences {
                        let plan = PlannedRequest(sequence: sequence, tenant: tenant, user: user, database: database)
                        let token = tokens?.next(worker: index)
                        let start = DispatchTime.now().uptimeNanoseconds
                        let outcome = await send(plan, mode: mode, account: account, token: token)
                        latencies.append(DispatchTime.now().uptimeNanoseconds - start)
                        tally.requests += 1
                        check(outcome, plan: plan, account: account, into: &tally)
                    }
                    return (latencies, tally)
                }
            }
            var all: [UInt64] = []
            var total = Tally()
            for await (latencies, tally) in group {
                all += latencies
                total.add(tally)
            }
            return (all, total)
        }
    }

    enum Outcome {
        case response(status: Int, report: DocumentReport?)
        case failed(String)
    }

    func send(_ plan: PlannedRequest, mode: Mode, account: Identity, token: String?) async -> Outcome {
        var request = HTTPClientRequest(url: baseURL + mode.prefix + plan.path)
        request.method = plan.method
        if let token {
            request.headers.add(name: "x-identity-assertion", value: token)
        } else {
            request.headers.add(name: "x-identity-account", value: account.name)
        }
        if let body = plan.body { request.body = .bytes(ByteBuffer(string: body)) }
        do {
            let response = try await client.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 1 << 20)
            let report = try? JSONDecoder().decode(DocumentReport.self, from: Data(buffer: body))
            return .response(status: Int(response.status.code), report: report)
        } catch {
            return .failed("\(error)")
        }
    }

    func check(_ outcome: Outcome, plan: PlannedRequest, account: Identity, into tally: inout Tally) {
        switch outcome {
        case let .failed(error):
            tally.transportErrors += 1
            tally.note("\(account.name) \(plan.path): \(error)")
        case let .response(status, report):
            guard let report else {
                tally.unexpected += 1
                tally.note("\(account.name) \(plan.path): \(status) without a report")
                return
            }
            if report.account != account.name || !report.hops.allSaw(account.name) {
                tally.misattributions += 1
                tally.note("\(account.name) \(plan.path): account \(report.account), hops \(report.hops)")
            }
            if plan.kind == .readOtherTenant, status == 200 || report.content != nil {
                tally.crossTenantReadsAccepted += 1
                tally.note("\(account.name) read \(plan.path) across tenants")
            }
            var expected = status == plan.expectedStatus
            if plan.kind == .readOtherTenant {
                expected = expected && report.code == (plan.usesDatabase ? "not-found" : "access-denied")
            }
            if plan.usesDatabase {
                expected = checkRows(report, status: status, plan: plan, account: account, into: &tally) && expected
            }
            if let owner = plan.expectedOwner, status == 200 {
                expected = expected && (report.content?.hasPrefix(owner + "|") ?? false)
            }
            if !expected {
                tally.unexpected += 1
                tally.note("\(account.name) \(plan.method) \(plan.path): \(status) \(report.code ?? ""), expected \(plan.expectedStatus)")
            }
        }
    }
}

extension LoadDriver {
    /// Audits the rows a `/db` answer listed: every one must be of the caller's tenant (counted in
    /// `crossTenantRows` otherwise); a listing must hold the caller's own `note`, a read exactly the document
    /// asked for. Returns whether the answer had the rows it should.
    func checkRows(_ report: DocumentReport, status: Int, plan: PlannedRequest, account: Identity, into tally: inout Tally) -> Bool {
        let tenant = Tenants.tenantIndex(of: account).map { Tenants.tenant($0).rawValue } ?? "-"
        let rows = report.rows ?? []
        switch plan.kind {
        case .list: tally.databaseListings += 1
        case .readOwn, .readColleague, .readOtherTenant: tally.databaseReads += 1
        case .write, .export: break
        }
        tally.databaseRows += rows.count
        let foreign = rows.filter { $0.tenant != tenant }
        if !foreign.isEmpty {
            tally.crossTenantRows += foreign.count
            tally.note("\(account.name) \(plan.method) \(plan.path): rows of another tenant: "
                + foreign.prefix(3).map { "\($0.tenant) \($0.account)/\($0.name)" }.joined(separator: ", "))
        }
        guard status == 200 else { return rows.isEmpty }
        switch plan.kind {
        case .list:
            return rows.contains(DatabaseRow(tenant: tenant, account: account.name, name: "note"))
        case .readOwn, .readColleague:
            return rows.count == 1 && rows.first?.account == plan.expectedOwner && rows.first?.name == "note"
        case .write:
            return rows.count == 1 && rows.first?.account == account.name && rows.first?.tenant == tenant
        case .readOtherTenant, .export:
            return false
        }
    }
}

/// Tokens signed before a timed phase (a caller's signing is the caller's cost, not the middleware's), one
/// queue per worker; or, for reusable tokens, one token per worker that it keeps for the whole run.
final class TokenPool: Sendable {
    /// One worker's tokens (only that worker takes from it; the lock makes the pool Sendable).
    final class Queue: Sendable {
        let tokens: Mutex<[String]>
        init(_ tokens: [String]) { self.tokens = Mutex(tokens) }
    }

    private let queues: [Queue]
    /// Each worker keeps its one token (`next` never uses it up).
    private let keeps: Bool

    /// One token per worker, kept: a client's bearer token, valid for the verifier's maximum lifetime (an hour).
    convenience init(keeping signer: IdentityAssertionSigner) throws {
        try self.init(signer: signer, perWorker: 1, lifetime: 3_600, keeps: true)
    }

    init(signer: IdentityAssertionSigner, perWorker: Int, lifetime: TimeInterval = 1_800, keeps: Bool = false) throws {
        self.keeps = keeps
        var queues: [Queue] = []
        for account in Tenants.accounts {
            let tenant = account.name.split(separator: "@").last.map(String.init)
            var tokens: [String] = []
            tokens.reserveCapacity(perWorker)
            for _ in 0..<perWorker {
                tokens.append(try signer.sign(account: account, tenant: tenant, audience: TenantServices.documentsAudience, lifetime: lifetime))
            }
            queues.append(Queue(tokens.reversed()))
        }
        self.queues = queues
    }

    func next(worker: Int) -> String? {
        queues[worker].tokens.withLock { keeps ? $0.last : $0.popLast() }
    }
}
