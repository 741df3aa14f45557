import Foundation

/// The rule for where a JWKS document may come from: whoever can change the document in transit chooses the
/// keys tokens are verified with, so only `https` is accepted, and plain `http` only to a loopback host
/// (`localhost`, `127.0.0.0/8`, `::1`) and only when ``RemoteKeySet/Configuration/allowsLoopbackHTTP`` is set
/// (a sidecar on the same machine, a test server). The rule applies to the configured address and to every
/// address a redirect led to.
enum JWKSAddress {
    /// Why `url` may not be fetched from, or `nil` when it may.
    static func refusal(of url: String, allowsLoopbackHTTP: Bool) -> JWKSFetchError? {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
              let host = parsed.host, !host.isEmpty
        else {
            return .invalidURL(url)
        }
        switch scheme {
        case "https":
            return nil
        case "http":
            return allowsLoopbackHTTP && isLoopback(host) ? nil : .insecureURL(url)
        default:
            return .invalidURL(url)
        }
    }

    /// Whether `host` names this machine's loopback interface: `localhost`, an IPv4 address in `127.0.0.0/8`
    /// in canonical dotted decimal (no leading zeros), or `::1` (with or without brackets).
    static func isLoopback(_ host: String) -> Bool {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0] == "127" else { return false }
        // Canonical dotted decimal only: a leading zero ("127.0.0.099") is not an address to inet_pton, so the
        // HTTP client would look such a host up in DNS, which then decides where a plain-http fetch goes.
        return octets.allSatisfy { octet in
            !octet.isEmpty && octet.count <= 3 && octet.allSatisfy { ("0"..."9").contains($0) }
                && (octet == "0" || !octet.hasPrefix("0")) && Int(octet).map { $0 <= 255 } == true
        }
    }
}
