import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// An HTTP/1.1 server on 127.0.0.1 (a free port) that answers every request with the current ``Reply`` and
/// counts the requests: the JWKS endpoint of the tests.
final class TestJWKSServer: Sendable {
    struct Reply: Sendable {
        var status: HTTPResponseStatus = .ok
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        /// Sent with `Transfer-Encoding: chunked` in chunks of 4 KiB (no `Content-Length`).
        var chunked = false
        /// Waits this long before answering.
        var delay: TimeAmount = .zero
        /// Never answers.
        var hang = false
        /// The `Content-Length` sent instead of the body's length (a body that stalls half-way).
        var announcedLength: Int?

        static func document(_ text: String, cacheControl: String? = nil) -> Reply {
            Reply(headers: cacheControl.map { [("Cache-Control", $0)] } ?? [], body: Array(text.utf8))
        }
    }

    private let channel: any Channel
    private let state: NIOLockedValueBox<(reply: Reply, requests: Int)>
    /// The accepted connections, closed by ``stop()`` with the listening socket.
    private let connections: NIOLockedValueBox<[any Channel]>
    let url: String

    private init(
        channel: any Channel, state: NIOLockedValueBox<(reply: Reply, requests: Int)>, connections: NIOLockedValueBox<[any Channel]>
    ) {
        self.channel = channel
        self.state = state
        self.connections = connections
        url = "http://127.0.0.1:\(channel.localAddress!.port!)/jwks.json"
    }

    static func start(_ reply: Reply) async throws -> TestJWKSServer {
        let state = NIOLockedValueBox((reply: reply, requests: 0))
        let connections = NIOLockedValueBox<[any Channel]>([])
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                connections.withLockedValue { $0.append(channel) }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TestJWKSServer(channel: channel, state: state, connections: connections)
    }

    var reply: Reply {
        get { state.withLockedValue { $0.reply } }
        set { state.withLockedValue { $0.reply = newValue } }
    }

    var requests: Int { state.withLockedValue { $0.requests } }

    /// Closes the listening socket and every connection: the endpoint is down.
    func stop() async throws {
        try await channel.close()
        for connection in connections.withLockedValue({ $0 }) {
            try? await connection.close()
        }
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let state: NIOLockedValueBox<(reply: Reply, requests: Int)>

        init(state: NIOLockedValueBox<(reply: Reply, requests: Int)>) {
            self.state = state
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            let reply = state.withLockedValue { state in
                state.requests += 1
                return state.reply
            }
            guard !reply.hang else { return }
            if reply.delay == .zero {
                respond(reply, context: context)
            } else {
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: reply.delay) {
                    bound.value.0.respond(reply, context: bound.value.1)
                }
            }
        }

        private func respond(_ reply: Reply, context: ChannelHandlerContext) {
            var headers = HTTPHeaders(reply.headers)
            if reply.chunked {
                headers.add(name: "Transfer-Encoding", value: "chunked")
            } else {
                headers.add(name: "Content-Length", value: String(reply.announcedLength ?? reply.body.count))
            }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: reply.status, headers: headers))), promise: nil)
            var offset = 0
            while offset < reply.body.count {
                let end = reply.chunked ? min(offset + 4_096, reply.body.count) : reply.body.count
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: reply.body[offset..<end])))), promise: nil)
                offset = end
            }
            if reply.announcedLength ?? reply.body.count > reply.body.count {
                context.flush()  // and never the end
            } else {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
