// The Hummingbird router of the wrk benchmark driven in process, without sockets, so that callgrind can count
// what one request costs on each route (the server itself runs dispatch's main loop, which valgrind cannot
// follow). Each request goes through the router's responder: route lookup, the middleware on /identity, the
// handler. Requests cycle over the 64 accounts' bearer tokens, every token verified once before counting.
//
//     identity-edge-calls-hummingbird baseline|identity COUNT
//
// Instructions per request: (total(COUNT) - total(0)) / COUNT, as scripts/callgrind-pairs.sh computes them.
import Dispatch
import EdgeService
import Foundation
import HTTPTypes
import Hummingbird
import IdentityHummingbird
import Logging
import NIOEmbedded
import Synchronization

let arguments = CommandLine.arguments
guard arguments.count == 3, ["baseline", "identity"].contains(arguments[1]), let count = Int(arguments[2]), count >= 0
else {
    FileHandle.standardError.write(Data("usage: \(arguments[0]) baseline|identity COUNT\n".utf8))
    exit(2)
}
let route = arguments[1]

@Sendable func hello(_: Request, _: BasicIdentityRequestContext) -> Response {
    Response(
        status: .ok, headers: [.contentType: "application/json"],
        body: ResponseBody(byteBuffer: ByteBuffer(string: EdgeService.body)))
}

let service = try EdgeService()
let router = Router(context: BasicIdentityRequestContext.self)
router.group("baseline").get("hello", use: hello)
router.group("identity")
    .add(middleware: IdentityMiddleware(verifier: service.verifier, policies: service.policies))
    .get("hello", use: hello)
let responder = router.buildResponder()
let logger = {
    var logger = Logger(label: "identity-edge-calls-hummingbird")
    logger.logLevel = .warning
    return logger
}()
let channel = EmbeddedChannel()
let requests = service.tokens.map { token in
    Request(
        head: HTTPRequest(
            method: .get, scheme: "http", authority: "127.0.0.1", path: "/\(route)/hello",
            headerFields: [.authorization: "Bearer \(token)"]),
        body: RequestBody(buffer: ByteBuffer()))
}

// A synchronous main that waits on a semaphore: an async main would run dispatch's main loop, which valgrind
// cannot follow. Detached, so that the task does not wait for the main actor this thread blocks.
let done = DispatchSemaphore(value: 0)
let outcome = Mutex(0)
Task.detached {
    func serve(_ request: Request) async -> Bool {
        let context = BasicIdentityRequestContext(source: .init(channel: channel, logger: logger))
        guard let response = try? await responder.respond(to: request, context: context) else { return false }
        return response.status == .ok
    }
    var failures = 0
    for request in requests where await !serve(request) { failures += 1 }
    for index in 0..<count where await !serve(requests[index % requests.count]) { failures += 1 }
    outcome.withLock { $0 = failures }
    done.signal()
}
done.wait()
let failed = outcome.withLock { $0 }
if failed > 0 {
    FileHandle.standardError.write(Data("\(failed) requests failed\n".utf8))
    exit(1)
}
