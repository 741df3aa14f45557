import Foundation
import HTTPTypes
import Hummingbird
import IdentityHummingbird
import IdentityLogging
import IdentityPolicy
import IdentityAssertions
import IdentityRuntime
import Logging

extension AuditReport: ResponseEncodable {}
extension AuditSummary: ResponseEncodable {}

/// The audit service (audience `audit`): one route, `POST /audit` (header `x-audit-event`), behind
/// ``IdentityMiddleware``, which logs the event as the verified identity and answers which account it saw;
/// and `GET /summary`, the counts of its log (for the load driver when the service runs in another process;
/// it names no account's data).
///
/// It has its own `PolicyManager` (a separate service admits on its own) and trusts one key: the document
/// service's. It runs inside the document service's process (``TenantServices`` makes one) or in a process of
/// its own (`tenant-load --serve-audit`), where it sees the identity only through the signed assertion.
public final class AuditService: Sendable {
    public static let audience = "audit"
    public static let issuer = "documents"
    public static let keyID = "documents-1"

    public let policies: PolicyManager
    public let verifier: IdentityAssertionVerifier
    public let log: AuditLog
    let logger: Logger

    /// - Parameters:
    ///   - trustedKey: the public key of the document service's signer (issuer `documents`, key ID `documents-1`).
    ///   - echo: print the log lines too.
    public init(trustedKey: AssertionVerificationKey, echo: Bool = false) {
        policies = Tenants.policyManager()
        // Every request of a load run makes a new call, valid for a minute: room for a million token IDs.
        verifier = IdentityAssertionVerifier(
            keys: [Self.keyID: trustedKey], issuers: [Self.issuer], audience: Self.audience, replayCacheCapacity: 1_000_000)
        let log = AuditLog(echo: echo)
        self.log = log
        let provider = Logger.MetadataProvider.identity(policyManager: policies)
        logger = Logger(label: "audit") { _ in AuditLogHandler(log: log, metadataProvider: provider) }
    }

    public func router() -> Router<TenantRequestContext> {
        let router = Router(context: TenantRequestContext.self)
        let logger = logger, log = log
        router.group().add(middleware: IdentityMiddleware(verifier: verifier, policies: policies))
            .post("/audit") { request, context -> AuditReport in
                let account = try TenantServices.caller(context).account
                let event = request.headers[HTTPField.Name("x-audit-event")!] ?? "-"
                // The identity metadata comes from the provider (the task's identity), "account" from the
                // handler: the audit log counts every line where they differ.
                logger.info("audit", metadata: ["account": .string(account.name), "event": .string(event)])
                let logged = Logger.MetadataProvider.identity().get()[Logger.MetadataProvider.identityKey]
                return AuditReport(account: TenantServices.seen(), loggedIdentity: logged?.description ?? "-")
            }
        router.get("/summary") { _, _ -> AuditSummary in
            AuditSummary(total: log.total, mismatched: log.mismatched, lastLine: log.lines.last.map(\.text))
        }
        return router
    }

    /// The service as a Hummingbird application on 127.0.0.1 (`port` 0: chosen by the system), calling
    /// `onRunning` with the port once it listens.
    public func application(port: Int = 0, onRunning: @escaping @Sendable (Int) -> Void) -> some ApplicationProtocol {
        Application(
            router: router(), configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in onRunning(channel.localAddress?.port ?? 0) },
            logger: Logger(label: "audit-service") { _ in SwiftLogNoOpLogHandler() })
    }
}

extension AuditLog.Line {
    /// `level key=value … message`, metadata sorted by key.
    public var text: String {
        "\(level) " + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ") + " \(message)"
    }
}
