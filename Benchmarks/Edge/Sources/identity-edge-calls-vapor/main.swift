// The Vapor application of the wrk benchmark driven in process, without sockets, so that callgrind can count what
// one request costs on each route (see identity-edge-calls-hummingbird). Each request goes through the
// application's responder: route lookup, the middleware on /identity, the handler. Requests cycle over the 64
// accounts' bearer tokens, every token verified once before counting.
//
//     identity-edge-calls-vapor baseline|identity COUNT
import Dispatch
import EdgeService
import Foundation
import IdentityVapor
import Synchronization
import Vapor

let arguments = CommandLine.arguments
guard arguments.count == 3, ["baseline", "identity"].contains(arguments[1]), let count = Int(arguments[2]), count >= 0
else {
    FileHandle.standardError.write(Data("usage: \(arguments[0]) baseline|identity COUNT\n".utf8))
    exit(2)
}
let route = arguments[1]

@Sendable func hello(_: Request) async -> Response {
    Response(status: .ok, headers: ["content-type": "application/json"], body: .init(string: EdgeService.body))
}

let service = try EdgeService()
// Only warnings, as the server logs: Vapor logs every request at `info` otherwise.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .warning
    return handler
}

// A synchronous main that waits on a semaphore: an async main would run dispatch's main loop, which valgrind
// cannot follow. Detached, so that the task does not wait for the main actor this thread blocks.
let done = DispatchSemaphore(value: 0)
let outcome = Mutex<Result<Int, any Error>>(.success(0))
Task.detached {
    do {
        var environment = Environment.production
        environment.arguments = [arguments[0]]
        let app = try await Application.make(environment)
        app.logger.logLevel = .warning
        app.grouped("baseline").get("hello", use: hello)
        app.grouped("identity")
            .grouped(IdentityMiddleware(verifier: service.verifier, policies: service.policies))
            .get("hello", use: hello)
        try await app.asyncBoot()
        let responder = app.responder.current
        let loop = app.eventLoopGroup.next()
        func serve(_ token: String) async -> Bool {
            let request = Request(
                application: app, method: .GET, url: URI(path: "/\(route)/hello"),
                headers: ["Authorization": "Bearer \(token)"], on: loop)
            guard let response = try? await responder.respond(to: request).get() else { return false }
            return response.status == .ok
        }
        var failures = 0
        for token in service.tokens where await !serve(token) { failures += 1 }
        for index in 0..<count where await !serve(service.tokens[index % service.tokens.count]) { failures += 1 }
        try await app.asyncShutdown()
        outcome.withLock { $0 = .success(failures) }
    } catch {
        outcome.withLock { $0 = .failure(error) }
    }
    done.signal()
}
done.wait()
switch outcome.withLock({ $0 }) {
case let .success(failed) where failed > 0:
    FileHandle.standardError.write(Data("\(failed) requests failed\n".utf8))
    exit(1)
case let .failure(error):
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(1)
case .success:
    break
}
