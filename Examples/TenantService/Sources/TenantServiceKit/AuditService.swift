import HTTPTypes
import Hummingbird
import IdentityHummingbird
import IdentityLogging
import IdentityRuntime
import Logging

extension AuditReport: ResponseEncodable {}

/// The audit service's one route, `POST /audit` (header `x-audit-event`), behind ``IdentityMiddleware`` with
/// audience `audit`: logs the event as the verified identity and answers which account it saw.
extension TenantServices {
    public func auditRouter() -> Router<TenantRequestContext> {
        let router = Router(context: TenantRequestContext.self)
        let logger = auditLogger
        router.group().add(middleware: IdentityMiddleware(verifier: auditVerifier, policies: auditPolicies))
            .post("/audit") { request, context -> AuditReport in
                let account = try Self.caller(context).account
                let event = request.headers[HTTPField.Name("x-audit-event")!] ?? "-"
                // The identity metadata comes from the provider (the task's identity), "account" from the
                // handler: the audit log counts every line where they differ.
                logger.info("audit", metadata: ["account": .string(account.name), "event": .string(event)])
                let logged = Logger.MetadataProvider.identity().get()[Logger.MetadataProvider.identityKey]
                return AuditReport(account: Self.seen(), loggedIdentity: logged?.description ?? "-")
            }
        return router
    }
}
