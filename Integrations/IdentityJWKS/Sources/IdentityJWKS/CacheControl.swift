/// The parts of a `Cache-Control` response header (RFC 9111 §5.2.2) that decide when a JWKS is fetched again.
struct CacheControl: Hashable {
    /// `max-age`, in seconds, when present and a valid non-negative integer.
    var maxAge: Int?
    /// `no-store` or `no-cache`: the document must not be reused without asking again.
    var noReuse = false

    /// The directives of every `Cache-Control` header value, comma-separated, names case-insensitive; a
    /// malformed `max-age` is ignored (as if absent), a repeated one keeps the first.
    init(headerValues: some Sequence<some StringProtocol>) {
        for value in headerValues {
            for directive in value.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1)
                let name = parts.first.map { $0.trimmingCharacters().lowercased() } ?? ""
                switch name {
                case "no-store", "no-cache":
                    noReuse = true
                case "max-age" where parts.count == 2 && maxAge == nil:
                    var argument = parts[1].trimmingCharacters()
                    if argument.hasPrefix("\""), argument.hasSuffix("\""), argument.count >= 2 {
                        argument = String(argument.dropFirst().dropLast())
                    }
                    // Delta-seconds: digits only; a value too large for Int is as good as infinite.
                    if !argument.isEmpty, argument.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
                        maxAge = Int(argument) ?? Int.max
                    }
                default:
                    continue
                }
            }
        }
    }

    /// How long the document may be used before it is fetched again: `no-store` / `no-cache` → `minimum`,
    /// `max-age` → clamped to `minimum...maximum`, neither → `fallback` clamped the same way.
    func refreshInterval(minimum: Duration, maximum: Duration, fallback: Duration) -> Duration {
        if noReuse { return minimum }
        let wanted: Duration = maxAge.map { .seconds(min($0, 100 * 365 * 86_400)) } ?? fallback
        return min(max(wanted, minimum), maximum)
    }
}

extension StringProtocol {
    /// Without the spaces and tabs at either end (HTTP's optional white space).
    fileprivate func trimmingCharacters() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[start...end])
    }
}
