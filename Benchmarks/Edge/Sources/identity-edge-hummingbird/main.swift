// The Hummingbird server of the wrk benchmark (run.sh; routes and accounts: EdgeService). Serves until killed.
//
//     identity-edge-hummingbird --port 18080 --tokens /tmp/tokens
import EdgeService
import Hummingbird
import IdentityHummingbird
import Logging

let options = EdgeOptions(Array(CommandLine.arguments.dropFirst()))
let service = try EdgeService()
try service.writeTokens(to: options.tokens)

@Sendable func hello(_: Request, _: BasicIdentityRequestContext) -> Response {
    Response(
        status: .ok, headers: [.contentType: "application/json"],
        body: ResponseBody(byteBuffer: ByteBuffer(string: EdgeService.body)))
}

let router = Router(context: BasicIdentityRequestContext.self)
router.group("baseline").get("hello", use: hello)
router.group("identity")
    .add(middleware: IdentityMiddleware(verifier: service.verifier, policies: service.policies))
    .get("hello", use: hello)
var logger = Logger(label: "identity-edge-hummingbird")
logger.logLevel = .warning
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: options.port)), logger: logger)
try await app.runService()
