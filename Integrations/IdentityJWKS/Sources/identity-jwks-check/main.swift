import Foundation
import IdentityAssertions
import IdentityJWKS

// identity-jwks-check --url URL --issuer I --audience A [--mode single-use|reusable] [--allow-loopback-http yes] [--timeout SECONDS]
//
// Fetches the JWKS document at URL with RemoteKeySet (one fetch, before the first token), then reads tokens from
// standard input, one per line, and prints for each, as `identity-harness assertion verify` does:
// `accepted "ACCOUNT" "TENANT"` (`-` for no tenant) or `refused CODE "DESCRIPTION"` (AssertionError's code).
// A failed fetch prints `fetch-failed "DESCRIPTION"` to standard error; the tokens are then refused by
// RemoteKeySet.verify with `refused keys-unavailable "DESCRIPTION"`. Exits 2 on a usage error.

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard flag.hasPrefix("--"), let value = arguments.popFirst() else {
        FileHandle.standardError.write(Data("identity-jwks-check: expected --name value, got \(flag)\n".utf8))
        exit(2)
    }
    options[String(flag.dropFirst(2))] = value
}
guard let url = options["url"], let issuer = options["issuer"], let audience = options["audience"] else {
    FileHandle.standardError.write(Data("usage: identity-jwks-check --url URL --issuer I --audience A [--mode single-use|reusable] [--allow-loopback-http yes]\n".utf8))
    exit(2)
}
let mode: IdentityAssertionVerifier.Mode = options["mode"] == "reusable" ? .reusable : .singleUse
let timeout = options["timeout"].flatMap(Double.init) ?? 10

let verifier = IdentityAssertionVerifier(keySet: AssertionKeySet(), issuers: [issuer], audience: audience, mode: mode)
let keys: RemoteKeySet
do throws(JWKSFetchError) {
    keys = try RemoteKeySet(
        url: url, verifier: verifier,
        configuration: .init(fetchTimeout: .milliseconds(Int(timeout * 1_000)), allowsLoopbackHTTP: options["allow-loopback-http"] == "yes"))
} catch {
    FileHandle.standardError.write(Data("refused-url \(quoted(error.description))\n".utf8))
    exit(2)
}
do throws(JWKSFetchError) {
    try await keys.refresh()
} catch {
    FileHandle.standardError.write(Data("fetch-failed \(quoted(error.description))\n".utf8))
}
while let line = readLine() {
    let token = line.trimmingCharacters(in: .whitespaces)
    guard !token.isEmpty else { continue }
    do throws(JWKSVerificationError) {
        let assertion = try await keys.verify(token)
        print("accepted \(quoted(assertion.account.name)) \(assertion.tenant.map(quoted) ?? "-")")
    } catch {
        switch error {
        case let .refused(refusal): print("refused \(refusal.code) \(quoted(refusal.description))")
        case let .keysUnavailable(cause): print("refused keys-unavailable \(quoted(cause.description))")
        }
    }
}

/// `text` in double quotes, every scalar outside printable ASCII, `"` and `\` written as `\u{HEX}`.
func quoted(_ text: String) -> String {
    var result = "\""
    for scalar in text.unicodeScalars {
        if (0x20...0x7E).contains(scalar.value), scalar != "\"", scalar != "\\" {
            result.unicodeScalars.append(scalar)
        } else {
            result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        }
    }
    return result + "\""
}
