// The Vapor server of the wrk benchmark (run.sh; routes and accounts: EdgeService). Serves until killed.
//
//     identity-edge-vapor --port 18080 --tokens /tmp/tokens
import EdgeService
import IdentityVapor
import Vapor

let options = EdgeOptions(Array(CommandLine.arguments.dropFirst()))
let service = try EdgeService()
try service.writeTokens(to: options.tokens)

// Only warnings: Vapor logs every request at `info` otherwise, which would be most of what is measured.
var environment = Environment.production
environment.arguments = [CommandLine.arguments[0]]
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .warning
    return handler
}
let app = try await Application.make(environment)
app.logger.logLevel = .warning
app.http.server.configuration.hostname = "127.0.0.1"
app.http.server.configuration.port = options.port

@Sendable func hello(_: Request) async -> Response {
    Response(status: .ok, headers: ["content-type": "application/json"], body: .init(string: EdgeService.body))
}

app.grouped("baseline").get("hello", use: hello)
app.grouped("identity")
    .grouped(IdentityMiddleware(verifier: service.verifier, policies: service.policies))
    .get("hello", use: hello)
do {
    try await app.execute()
} catch {
    try await app.asyncShutdown()
    throw error
}
try await app.asyncShutdown()
