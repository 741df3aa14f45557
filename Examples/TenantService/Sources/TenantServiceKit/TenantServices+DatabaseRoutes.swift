import Foundation
import HTTPTypes
import Hummingbird
import IdentityPostgres
import IdentityRuntime
import NIOCore

/// The document service's routes over PostgreSQL (``DatabaseDocuments``), beside the file routes under every
/// prefix (`/v1`, `/reusable`, `/plain`, `/bare`). The handlers never name a tenant: the database answers the
/// rows of the tenant the transaction is bound to, from the identity the middleware bound. The database work
/// runs in the `Task` hop of the same legacy hops as the file routes (an `IdentityDispatchQueue` block, an
/// `IdentityOperationQueue` operation, a `Task`), so the binding comes from the identity those hops carried.
///
/// | route | what |
/// |---|---|
/// | `PUT /db/docs/:owner/:name` | stores the body as the caller's document; `owner` must be the caller: else 403 `not-your-account`, before the database |
/// | `GET /db/docs/:owner/:name` | `owner`'s document, asked by account and name only: another tenant's is not among the rows, so 404 `not-found` |
/// | `GET /db/docs` | `SELECT tenant, account, name FROM tenant_docs.documents`, no `WHERE`: the report lists every row the database answered |
///
/// Names are percent-decoded from the path and stored as they are (quotes, `%`, `_`, non-ASCII), 1 to 256
/// UTF-8 bytes with no control character. A `TenantDatabaseError` is a problem report (`refuse(_:_:)` below);
/// a service started without a database answers every `/db` route with 503 `database-not-configured`.
extension TenantServices {
    func addDatabaseRoutes(to group: RouterGroup<TenantRequestContext>) {
        group.put("/db/docs/:owner/:name") { request, context in
            let caller = try Self.caller(context)
            guard let documents = self.databaseDocuments else { return Self.noDatabase(caller) }
            let name = try Self.databaseDocumentName(context)
            guard try Self.accountParameter(context, "owner") == caller.account else { return Self.notYours(caller) }
            let bytes = try await request.body.collect(upTo: 64 * 1024)
            guard let body = String(validating: bytes.readableBytesView, as: UTF8.self), !body.utf8.contains(0) else {
                throw HTTPError(.badRequest, message: "a document's body is UTF-8 text without NUL")
            }
            let (outcome, hops) = await self.throughHops(event: "db write", inTask: {
                () async -> Result<DatabaseRow, TenantDatabaseError> in
                do throws(TenantDatabaseError) { return .success(try await documents.put(name: name, body: body)) } catch {
                    return .failure(error)
                }
            })
            var report = DocumentReport(account: caller.account.name, tenant: caller.tenant, hops: hops)
            switch outcome {
            case let .success(row):
                report.rows = [row]
                return Self.respond(report, .ok)
            case let .failure(error):
                return Self.refuse(report, error)
            }
        }

        group.get("/db/docs/:owner/:name") { _, context in
            let caller = try Self.caller(context)
            guard let documents = self.databaseDocuments else { return Self.noDatabase(caller) }
            let name = try Self.databaseDocumentName(context)
            let owner = try Self.accountParameter(context, "owner")
            let (outcome, hops) = await self.throughHops(event: "db read \(owner.name)", inTask: {
                () async -> Result<(row: DatabaseRow, body: String)?, TenantDatabaseError> in
                do throws(TenantDatabaseError) { return .success(try await documents.get(owner: owner, name: name)) } catch {
                    return .failure(error)
                }
            })
            var report = DocumentReport(account: caller.account.name, tenant: caller.tenant, hops: hops)
            switch outcome {
            case let .success(found?):
                report.rows = [found.row]
                report.content = found.body
                return Self.respond(report, .ok)
            case .success(nil):
                return Self.problem(report, .notFound, code: "not-found", title: "No such document",
                                    detail: "the database has no document of \(owner.name) by that name for this tenant")
            case let .failure(error):
                return Self.refuse(report, error)
            }
        }

        group.get("/db/docs") { _, context in
            let caller = try Self.caller(context)
            guard let documents = self.databaseDocuments else { return Self.noDatabase(caller) }
            let (outcome, hops) = await self.throughHops(event: "db list", inTask: {
                () async -> Result<[DatabaseRow], TenantDatabaseError> in
                do throws(TenantDatabaseError) { return .success(try await documents.list()) } catch {
                    return .failure(error)
                }
            })
            var report = DocumentReport(account: caller.account.name, tenant: caller.tenant, hops: hops)
            switch outcome {
            case let .success(rows):
                report.rows = rows
                return Self.respond(report, .ok)
            case let .failure(error):
                return Self.refuse(report, error)
            }
        }
    }

    /// A document name in the database: the path parameter percent-decoded, 1 to 256 UTF-8 bytes, no control
    /// character (so no NUL, which PostgreSQL text cannot hold). Anything else is stored as it is.
    static func databaseDocumentName(_ context: TenantRequestContext) throws -> String {
        guard let raw = context.parameters.get("name"), let name = raw.removingPercentEncoding,
              (1...256).contains(name.utf8.count),
              !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw HTTPError(.badRequest, message: "a document name is 1 to 256 bytes of percent-encoded UTF-8, no control characters")
        }
        return name
    }

    /// 503 `database-not-configured`: the service runs without PostgreSQL, and the `/db` routes refuse rather
    /// than answer from anywhere else.
    static func noDatabase(_ caller: Caller) -> Response {
        let here = seen()
        return problem(
            DocumentReport(account: caller.account.name, tenant: caller.tenant,
                           hops: HopReport(queue: here, operation: here, task: here, remote: here)),
            .serviceUnavailable, code: "database-not-configured", title: "No database",
            detail: "this service runs without PostgreSQL (no PGHOST when it started): the /db routes are refused")
    }

    /// A `TenantDatabaseError` as a problem: who the caller is decides 403 (`no-identity`, `account-blocked`,
    /// `account-not-allowed`, `unrepresentable-name`); a database that is not there, not verified or not safe
    /// 503 (`policy-unavailable`, `database-unavailable`, `database-not-verified`, `database-unsafe`,
    /// `database-binding-refused`, `database-timeout`); a failed statement 500 `database-failure`.
    static func refuse(_ report: DocumentReport, _ error: TenantDatabaseError) -> Response {
        let detail = "\(error)"
        return switch error {
        case .noIdentity, .unmanagedIdentity:
            problem(report, .forbidden, code: "no-identity", title: "No identity", detail: detail)
        case .accountBlocked:
            problem(report, .forbidden, code: "account-blocked", title: "Account blocked", detail: detail)
        case .accountNotAllowed:
            problem(report, .forbidden, code: "account-not-allowed", title: "Account not allowed", detail: detail)
        case .unrepresentableName:
            problem(report, .forbidden, code: "unrepresentable-name", title: "Name cannot be bound", detail: detail)
        case .policyUnavailable:
            problem(report, .serviceUnavailable, code: "policy-unavailable", title: "Policy unavailable", detail: detail)
        case .unavailable:
            problem(report, .serviceUnavailable, code: "database-unavailable", title: "Database unavailable", detail: detail)
        case .notVerified:
            problem(report, .serviceUnavailable, code: "database-not-verified", title: "Database not verified", detail: detail)
        case .unsafeConfiguration, .invalidIdentifier:
            problem(report, .serviceUnavailable, code: "database-unsafe", title: "Database set-up unsafe", detail: detail)
        case .bindingRefused:
            problem(report, .serviceUnavailable, code: "database-binding-refused", title: "Identity binding refused", detail: detail)
        case .timedOut:
            problem(report, .serviceUnavailable, code: "database-timeout", title: "Database transaction timed out", detail: detail)
        case .queryFailed, .rolledBack:
            problem(report, .internalServerError, code: "database-failure", title: "Database failure", detail: detail)
        }
    }
}
