import AsyncHTTPClient
import IdentityAssertions
import NIOCore
import NIOHTTP1

/// One GET of a JWKS document: bounded in time and in size, the body read as it streams in.
struct JWKSFetcher: Sendable {
    let client: HTTPClient
    let url: String
    let timeout: Duration
    let maximumLength: Int
    /// ``RemoteKeySet/Configuration/allowsLoopbackHTTP``, applied to every address a redirect led to.
    let allowsLoopbackHTTP: Bool

    /// What a successful fetch gives: the key set and the response's caching rules.
    struct Fetched: Sendable {
        let keySet: AssertionKeySet
        let cacheControl: CacheControl
    }

    /// Fetches and reads the document; every failure is a ``JWKSFetchError``. The whole exchange, body
    /// included, ends by the timeout: the request has it as its deadline (the client retries a refused
    /// connection until then), and a timer cancels the read 100 ms later at the latest.
    func fetch() async -> Result<Fetched, JWKSFetchError> {
        await withTaskGroup(of: Result<Fetched, JWKSFetchError>?.self) { group in
            group.addTask { await self.exchange() }
            group.addTask {
                // Cancelled (nil) once the exchange has finished. A little after the request's own deadline, so
                // that the client's error (the last connection failure, say) is the one reported when it has one.
                do { try await Task.sleep(for: self.timeout + .milliseconds(100)) } catch { return nil }
                return .failure(.timeout)
            }
            var outcome: Result<Fetched, JWKSFetchError> = .failure(.timeout)
            for await result in group {
                guard let result else { continue }
                outcome = result
                group.cancelAll()
                break
            }
            return outcome
        }
    }

    private func exchange() async -> Result<Fetched, JWKSFetchError> {
        var request = HTTPClientRequest(url: url)
        request.method = .GET
        request.headers.add(name: "Accept", value: "application/jwk-set+json, application/json")
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, deadline: .now() + TimeAmount(timeout))
        } catch {
            return .failure(Self.classify(error))
        }
        // The client follows redirects from https to plain http: a document reached through such a hop is refused.
        if let refusal = Self.refusedHop(response.history.map(\.request.url), allowsLoopbackHTTP: allowsLoopbackHTTP) {
            return .failure(refusal)
        }
        guard response.status == .ok else {
            // Not read: dropping the response closes or recycles the connection.
            return .failure(.httpStatus(Int(response.status.code)))
        }
        if let announced = response.headers.first(name: "Content-Length").flatMap({ Int($0) }), announced > maximumLength {
            return .failure(.bodyTooLarge(maximum: maximumLength))
        }
        var body: [UInt8] = []
        do {
            for try await chunk in response.body {
                guard body.count + chunk.readableBytes <= maximumLength else {
                    return .failure(.bodyTooLarge(maximum: maximumLength))
                }
                body.append(contentsOf: chunk.readableBytesView)
            }
        } catch {
            return .failure(Self.classify(error))
        }
        let keySet: AssertionKeySet
        do throws(AssertionError) {
            keySet = try AssertionKeySet(jwks: body)
        } catch {
            guard case let .invalidKeySet(refusal) = error else { return .failure(.transport("\(error)")) }
            return .failure(.invalidDocument(refusal))
        }
        return .success(Fetched(keySet: keySet, cacheControl: CacheControl(headerValues: response.headers["Cache-Control"])))
    }

    /// The refusal of the first of `addresses` (the requests of an exchange, redirects included) that may not be
    /// fetched from, or `nil` when every one may.
    static func refusedHop(_ addresses: [String], allowsLoopbackHTTP: Bool) -> JWKSFetchError? {
        for address in addresses {
            if let refusal = JWKSAddress.refusal(of: address, allowsLoopbackHTTP: allowsLoopbackHTTP) { return refusal }
        }
        return nil
    }

    /// The ``JWKSFetchError`` of an error thrown by the HTTP client.
    static func classify(_ error: any Error) -> JWKSFetchError {
        if let error = error as? HTTPClientError,
           [.deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout].contains(error) {
            return .timeout
        }
        if error is CancellationError { return .timeout }
        return .transport(String(describing: error))
    }
}

extension TimeAmount {
    /// The same length of time, to the nanosecond (saturating).
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        self = overflow ? .nanoseconds(.max) : .nanoseconds(whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue)
    }
}
