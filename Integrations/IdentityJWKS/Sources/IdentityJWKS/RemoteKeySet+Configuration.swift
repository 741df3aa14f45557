extension RemoteKeySet {
    /// How often a ``RemoteKeySet`` fetches, and how long a fetch may take.
    ///
    /// Every interval is clamped to be at least zero, and ``maximumRefreshInterval`` to be at least
    /// ``minimumRefreshInterval``.
    public struct Configuration: Sendable, Hashable {
        /// The shortest time a fetched set is used before the next scheduled fetch, whatever `Cache-Control`
        /// says (`max-age=0`, `no-store` and `no-cache` mean this), and the wait before retrying after a failed
        /// fetch. Default 60 s.
        public var minimumRefreshInterval: Duration
        /// The longest time a fetched set is used before the next scheduled fetch, whatever `max-age` says.
        /// Default 24 h.
        public var maximumRefreshInterval: Duration
        /// How long a set is used when the response has no `Cache-Control` `max-age` (then clamped as `max-age`
        /// is). Default 1 h.
        public var defaultRefreshInterval: Duration
        /// At most one refresh per this interval is made because a token named an unknown `kid` (see
        /// ``RemoteKeySet/refreshForUnknownKey()``), so that tokens with made-up key IDs cannot make the
        /// endpoint be hammered. Default 60 s.
        public var unknownKeyRefreshInterval: Duration
        /// The deadline of one fetch, from the request to the last byte of the body. Default 10 s.
        public var fetchTimeout: Duration
        /// Whether plain `http` is accepted for a loopback host (`localhost`, `127.0.0.0/8`, `::1`): a sidecar
        /// on the same machine, a test server. Default `false`: only `https`. Plain `http` to any other host is
        /// refused whatever this says, for the configured address and for every redirect.
        public var allowsLoopbackHTTP: Bool

        public init(
            minimumRefreshInterval: Duration = .seconds(60), maximumRefreshInterval: Duration = .seconds(86_400),
            defaultRefreshInterval: Duration = .seconds(3_600), unknownKeyRefreshInterval: Duration = .seconds(60),
            fetchTimeout: Duration = .seconds(10), allowsLoopbackHTTP: Bool = false
        ) {
            self.minimumRefreshInterval = max(.zero, minimumRefreshInterval)
            self.maximumRefreshInterval = max(self.minimumRefreshInterval, maximumRefreshInterval)
            self.defaultRefreshInterval = max(.zero, defaultRefreshInterval)
            self.unknownKeyRefreshInterval = max(.zero, unknownKeyRefreshInterval)
            self.fetchTimeout = max(.zero, fetchTimeout)
            self.allowsLoopbackHTTP = allowsLoopbackHTTP
        }
    }
}
