import Dispatch
import Foundation
import GRPCCore
import IdentityGRPC
import IdentityRuntime

/// What a handler (or one message's handling) saw: the identity at each hop, and the admitted identity.
struct Report: Codable, Sendable, Hashable {
    /// The message handled (or the request of a unary call).
    var message: String
    /// `AdmittedIdentity.current?.account`.
    var admitted: String
    /// The thread identity where the message was handled.
    var thread: String
    /// An `IdentityDispatchQueue` block submitted there.
    var dispatchQueue: String
    /// An `IdentityOperationQueue` operation added there.
    var operationQueue: String
    /// A `Task {}` created there.
    var task: String
    /// A `Task {}` created inside an `IdentityDispatchQueue` block.
    var queueThenTask: String
    /// `Task.detached` (must not carry it).
    var detached: String
    /// A raw `DispatchQueue` (must not carry it).
    var rawQueue: String
    /// `AdmittedIdentity.current?.tenant`, its source and whether its policy encrypts files.
    var tenant: String
    var source: String
    var policy: String

    /// The hops that carry the identity.
    var carried: [String] { [admitted, thread, dispatchQueue, operationQueue, task, queueThenTask] }
    /// The hops that do not.
    var notCarried: [String] { [detached, rawQueue] }
}

func name(_ identity: Identity?) -> String { identity?.name ?? "-" }

/// Looks at the identity where it is called and at every hop from there.
func observe(_ message: String) async -> Report {
    let queue = IdentityDispatchQueue(label: "probe.hop")
    let operations = IdentityOperationQueue()
    let onQueue: Identity? = await withCheckedContinuation { done in
        queue.async { done.resume(returning: IdentityContext.effectiveFileIdentity) }
    }
    let inOperation: Identity? = await withCheckedContinuation { done in
        operations.addOperation { done.resume(returning: IdentityContext.effectiveFileIdentity) }
    }
    let inTask = await Task { IdentityContext.effectiveFileIdentity }.value
    let queueThenTask: Identity? = await withCheckedContinuation { done in
        queue.async { Task { done.resume(returning: IdentityContext.effectiveFileIdentity) } }
    }
    let detached = await Task.detached { IdentityContext.effectiveFileIdentity }.value
    let raw: Identity? = await withCheckedContinuation { done in
        DispatchQueue.global().async { done.resume(returning: IdentityContext.effectiveFileIdentity) }
    }
    let admitted = AdmittedIdentity.current
    return Report(
        message: message, admitted: name(admitted?.account), thread: name(IdentityContext.currentThreadIdentity),
        dispatchQueue: name(onQueue), operationQueue: name(inOperation), task: name(inTask),
        queueThenTask: name(queueThenTask), detached: name(detached), rawQueue: name(raw),
        tenant: admitted?.tenant ?? "-", source: admitted?.source.rawValue ?? "-",
        policy: admitted.map { $0.policy.isFileEncryptionRequired ? "encrypts" : "clear" } ?? "-")
}

/// Counts the handler runs (a refused call must never reach the handler).
final class HandlerRuns: Sendable {
    private let count = Locked(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// A hand-written service (no code generation) with one method of each shape, each reporting what its
/// handler saw, plus one that fails.
struct ProbeService: RegistrableRPCService {
    static let service = ServiceDescriptor(fullyQualifiedService: "identity.Probe")
    /// Unary: the report of the handler.
    static let whoAmI = MethodDescriptor(service: service, method: "WhoAmI", type: .unary)
    /// Server streaming: the request is a count; one report per message written.
    static let count = MethodDescriptor(service: service, method: "Count", type: .serverStreaming)
    /// Client streaming: one report per message received, all in the one response.
    static let collect = MethodDescriptor(service: service, method: "Collect", type: .clientStreaming)
    /// Bidirectional: one report per message received, written back as it is handled.
    static let echo = MethodDescriptor(service: service, method: "Echo", type: .bidirectionalStreaming)
    /// Unary: throws the service's own error.
    static let missing = MethodDescriptor(service: service, method: "Missing", type: .unary)

    let runs = HandlerRuns()

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let runs = runs
        router.registerHandler(
            forMethod: Self.whoAmI, deserializer: UTF8Coder(), serializer: JSONCoder<Report>()
        ) { request, _ in
            runs.increment()
            let single = try await ServerRequest(stream: request)
            return StreamingServerResponse(single: ServerResponse(message: await observe(single.message)))
        }
        router.registerHandler(
            forMethod: Self.count, deserializer: UTF8Coder(), serializer: JSONCoder<Report>()
        ) { request, _ in
            runs.increment()
            let single = try await ServerRequest(stream: request)
            let count = Int(single.message) ?? 0
            // Written by the response body, which gRPC runs after the interceptors have returned.
            return StreamingServerResponse { writer in
                for index in 0..<count { try await writer.write(await observe("\(index)")) }
                return [:]
            }
        }
        router.registerHandler(
            forMethod: Self.collect, deserializer: UTF8Coder(), serializer: JSONCoder<[Report]>()
        ) { request, _ in
            runs.increment()
            var reports: [Report] = []
            for try await message in request.messages { reports.append(await observe(message)) }
            return StreamingServerResponse(single: ServerResponse(message: reports))
        }
        router.registerHandler(
            forMethod: Self.echo, deserializer: UTF8Coder(), serializer: JSONCoder<Report>()
        ) { request, _ in
            runs.increment()
            return StreamingServerResponse { writer in
                for try await message in request.messages { try await writer.write(await observe(message)) }
                return [:]
            }
        }
        router.registerHandler(
            forMethod: Self.missing, deserializer: UTF8Coder(), serializer: UTF8Coder()
        ) { _, _ -> StreamingServerResponse<String> in
            runs.increment()
            throw RPCError(code: .notFound, message: "no such document")
        }
    }
}
