import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import IdentityHummingbird
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import NIOCore
import Prometheus

/// The document service's routes. Each request for an account runs through the same legacy hops, deepest
/// last: an `IdentityDispatchQueue` block submits an `IdentityOperationQueue` operation (which does the file
/// work), which creates a `Task` that calls the audit service with a new assertion for the identity it sees.
/// Nothing passes the identity by hand: each hop inherits it from the one that submitted it.
///
/// | route | what |
/// |---|---|
/// | `PUT /docs/:owner/:name` | stores the body as the caller's document (owner: the caller; encrypted per policy); `owner` must be the caller: else 403 `not-your-account` |
/// | `GET /docs/:owner/:name` | reads `owner`'s document as the caller: 403 `access-denied` for another tenant's |
/// | `POST /docs/:owner/:name/export?to=onedrive\|sharepoint\|dropbox\|local` | copies the caller's document where the policy allows saving it: else 403 `save-to-blocked` |
/// | `DELETE /accounts/:account` | wipes the caller's own account (files and keys): 403 `not-your-account` for another |
/// | `/db/docs...` | documents in PostgreSQL under row-level security (``addDatabaseRoutes(to:)``) |
///
/// And, outside every prefix and middleware, `GET /metrics`: the identity metrics in Prometheus' text format.
extension TenantServices {
    public func documentRouter() -> Router<TenantRequestContext> {
        let router = Router(context: TenantRequestContext.self)
        let registry = metricsRegistry
        router.get("/metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        addDocumentRoutes(to: router.group("/v1").add(middleware: IdentityMiddleware(verifier: documentsVerifier, policies: policies)))
        addDocumentRoutes(to: router.group("/reusable").add(middleware: IdentityMiddleware(verifier: bearerVerifier, policies: policies)))
        addDocumentRoutes(to: router.group("/plain").add(middleware: PlainIdentityMiddleware(policies: policies)))
        addDocumentRoutes(to: router.group("/bare").add(
            middleware: BareSignatureMiddleware(key: gatewaySigner.key.publicKey, policies: policies)))
        return router
    }

    func addDocumentRoutes(to group: RouterGroup<TenantRequestContext>) {
        addDatabaseRoutes(to: group)
        group.put("/docs/:owner/:name") { request, context in
            let caller = try Self.caller(context)
            let name = try Self.documentName(context)
            guard try Self.accountParameter(context, "owner") == caller.account else { return Self.notYours(caller) }
            let body = try await request.body.collect(upTo: 64 * 1024)
            let contents = Data(buffer: body)
            let path = Self.folder(root: self.root, account: caller.account) + "/" + name
            let (outcome, hops) = await self.throughHops(event: "write \(name)") { () -> Result<Bool, ProtectionError> in
                do throws(ProtectionError) {
                    try self.files.writeFile(atPath: path, contents: contents)
                    return .success(try self.files.isFileEncrypted(atPath: path))
                } catch {
                    return .failure(error)
                }
            }
            var report = DocumentReport(account: caller.account.name, tenant: caller.tenant, hops: hops)
            switch outcome {
            case let .success(encrypted):
                report.encrypted = encrypted
                return Self.respond(report, .ok)
            case let .failure(error):
                return Self.refuse(report, error)
            }
        }

        group.get("/docs/:owner/:name") { _, context in
            let caller = try Self.caller(context)
            let name = try Self.documentName(context)
            let owner = try Self.accountParameter(context, "owner")
            let path = Self.folder(root: self.root, account: owner) + "/" + name
            let (outcome, hops) = await self.throughHops(event: "read \(owner.name)/\(name)") { () -> Result<Data, ProtectionError> in
                do throws(ProtectionError) { return .success(try self.files.readFile(atPath: path)) } catch { return .failure(error) }
            }
            var report = DocumentReport(account: caller.account.name, tenant: caller.tenant, hops: hops)
            switch outcome {
            case let .success(data):
                report.content = String(decoding: data, as: UTF8.self)
                return Self.respond(report, .ok)
            case let .failure(error):
                return Self.refuse(report, error)
            }
        }

        group.post("/docs/:owner/:name/export") { request, context in
            let caller = try Self.caller(context)
            let name = try Self.documentName(context)
            guard try Self.accountParameter(context, "owner") == caller.account else { return Self.notYours(caller) }
            guard let targetName = request.uri.queryParameters["to"], let target = ExportTarget(rawValue: String(targetName)) else {
                throw HTTPError(.badRequest, message: "?to= one of \(ExportTarget.allCases.map(\.rawValue))")
            }
            // The policy in the request context: the caller's account's, fixed at admission.
            let allowed = caller.policy.isSaveToAllowed(for: target.location, account: caller.account)
            let source = Self.folder(root: self.root, account: caller.account) + "/" + name
            let copy = "\(self.root)/exports/\(target.rawValue)/\(caller.tenant)/\(caller.account.name)-\(name)"
            let (outcome, hops) = await self.throughHops(event: "export \(name) to \(target.rawValue)") { () -> Result<Bool, ProtectionError>? in
                guard allowed else { return nil }
                do throws(ProtectionError) {
                    try self.files.writeFile(atPath: copy, contents: try self.files.readFile(atPath: source))
                    return .success(try self.files.isFileEncrypted(atPath: copy))
                } catch {
                    return .failure(error)
                }
            }
            var report = DocumentReport(account: caller.account.name, tenant: caller.tenant, hops: hops)
            switch outcome {
            case nil:
                return Self.problem(report, .forbidden, code: "save-to-blocked", title: "Save-to location not allowed",
                                    detail: "the policy of \(caller.account.name) does not allow saving to \(target.rawValue)")
            case let .success(encrypted)?:
                report.encrypted = encrypted
                report.exportedTo = target.rawValue
                return Self.respond(report, .ok)
            case let .failure(error)?:
                return Self.refuse(report, error)
            }
        }

        group.delete("/accounts/:account") { _, context in
            let caller = try Self.caller(context)
            let account = try Self.accountParameter(context, "account")
            let (_, hops) = await self.throughHops(event: "wipe \(account.name)") { () }
            let report = DocumentReport(account: caller.account.name, tenant: caller.tenant, hops: hops)
            guard account == caller.account else {
                return Self.problem(report, .forbidden, code: "not-your-account", title: "Not your account",
                                    detail: "an account can wipe only its own data")
            }
            let wipe = await self.policies.wipeData(forAccount: account)
            if let error = wipe.error { return Self.refuse(report, error) }
            var done = report
            done.removedFiles = wipe.removedFiles.count
            return Self.respond(done, .ok)
        }
    }

    // MARK: - Hops

    /// Runs `work` in an `IdentityOperationQueue` operation submitted from an `IdentityDispatchQueue` block,
    /// then calls the audit service from a `Task` created in that operation; reports what each hop saw.
    func throughHops<T: Sendable>(event: String, _ work: @escaping @Sendable () -> T) async -> (T, HopReport) {
        await withCheckedContinuation { (done: CheckedContinuation<(T, HopReport), Never>) in
            queue.async {
                let onQueue = Self.seen()
                self.operations.addOperation {
                    let inOperation = Self.seen()
                    let result = work()
                    Task {
                        let inTask = Self.seen()
                        let remote = await self.callAudit(event: event)
                        done.resume(returning: (result, HopReport(queue: onQueue, operation: inOperation, task: inTask, remote: remote)))
                    }
                }
            }
        }
    }

    /// The same hops, with async `work` (the database's) run in the `Task` hop, before the audit call.
    func throughHops<T: Sendable>(event: String, inTask work: @escaping @Sendable () async -> T) async -> (T, HopReport) {
        await withCheckedContinuation { (done: CheckedContinuation<(T, HopReport), Never>) in
            queue.async {
                let onQueue = Self.seen()
                self.operations.addOperation {
                    let inOperation = Self.seen()
                    Task {
                        let inTask = Self.seen()
                        let result = await work()
                        let remote = await self.callAudit(event: event)
                        done.resume(returning: (result, HopReport(queue: onQueue, operation: inOperation, task: inTask, remote: remote)))
                    }
                }
            }
        }
    }

    static func seen() -> String { IdentityContext.effectiveFileIdentity?.name ?? "-" }

    /// Calls the audit service as the identity of the calling task, with a new assertion for its audience:
    /// the account the audit service saw, `"-"` with no identity, `"!STATUS"` or `"!error"` on failure.
    func callAudit(event: String) async -> String {
        guard let account = IdentityContext.effectiveFileIdentity, let base = auditBaseURL.withLock({ $0 }) else { return "-" }
        do {
            let token = try serviceSigner.sign(
                account: account, tenant: policies.tenant(for: account).rawValue, audience: Self.auditAudience, lifetime: 60)
            var request = HTTPClientRequest(url: base + "/audit")
            request.method = .POST
            request.headers.add(name: "x-identity-assertion", value: token)
            request.headers.add(name: "x-audit-event", value: event)
            let response = try await httpClient.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 64 * 1024)
            guard response.status == .ok else { return "!\(response.status.code)" }
            return try JSONDecoder().decode(AuditReport.self, from: Data(buffer: body)).account
        } catch {
            return "!error"
        }
    }

    // MARK: - Requests and responses

    static func caller(_ context: TenantRequestContext) throws -> Caller {
        guard let caller = context.caller else { throw HTTPError(.unauthorized) }
        return caller
    }

    /// A document name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
    static func documentName(_ context: TenantRequestContext) throws -> String {
        guard let name = context.parameters.get("name"), (1...64).contains(name.utf8.count), !name.hasPrefix("."),
              name.utf8.allSatisfy({ isSafe($0) && $0 != UInt8(ascii: "@") }) else {
            throw HTTPError(.badRequest, message: "a document name is 1 to 64 of A-Z a-z 0-9 . _ -")
        }
        return name
    }

    /// An account in a path: a valid account name of path-safe characters.
    static func accountParameter(_ context: TenantRequestContext, _ name: String) throws -> Identity {
        guard let text = context.parameters.get(name), !text.contains(".."), !text.hasPrefix("."),
              text.utf8.allSatisfy(isSafe), let account = try? Identity(validating: text), !account.isUnmanaged else {
            throw HTTPError(.badRequest, message: "not an account name")
        }
        return account
    }

    static func isSafe(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "@"): true
        default: false
        }
    }

    /// 403 `not-your-account`, before any hop: an account writes, exports and wipes only its own data.
    static func notYours(_ caller: Caller) -> Response {
        let here = seen()
        return problem(
            DocumentReport(account: caller.account.name, tenant: caller.tenant,
                           hops: HopReport(queue: here, operation: here, task: here, remote: here)),
            .forbidden, code: "not-your-account", title: "Not your account",
            detail: "an account writes, exports and wipes only its own documents")
    }

    static func respond(_ report: DocumentReport, _ status: HTTPResponse.Status) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(report)) ?? Data()
        let type = status.code >= 400 ? "application/problem+json" : "application/json"
        return Response(status: status, headers: [.contentType: type], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func problem(
        _ report: DocumentReport, _ status: HTTPResponse.Status, code: String, title: String, detail: String
    ) -> Response {
        var report = report
        report.type = "https://identity-runtime.invalid/problems/\(code)"
        report.title = title
        report.status = status.code
        report.detail = detail
        report.code = code
        return respond(report, status)
    }

    /// A `ProtectionError` as a problem: 403 `access-denied` or `account-blocked`, 404 `not-found`, else 500.
    static func refuse(_ report: DocumentReport, _ error: ProtectionError) -> Response {
        switch error {
        case .accessDenied:
            problem(report, .forbidden, code: "access-denied", title: "Access denied", detail: "\(error)")
        case .accountBlocked:
            problem(report, .forbidden, code: "account-blocked", title: "Account blocked", detail: "\(error)")
        case .fileNotFound:
            problem(report, .notFound, code: "not-found", title: "No such document", detail: "\(error)")
        default:
            problem(report, .internalServerError, code: "storage-failure", title: "Storage failure", detail: "\(error)")
        }
    }
}
