import Foundation
import IdentityAssertions
import IdentityRuntime

/// `identity-harness assertion keygen | jwks OPTIONS | sign OPTIONS | verify OPTIONS`: the signed identity
/// assertions from the command line, for interoperability checks with other JWT implementations
/// (`scripts/jwt-interop.py`).
///
/// - `keygen`: prints `private HEX` and `public HEX` (raw Ed25519 keys).
/// - `jwks --public-key HEX --kid K`: prints the JWKS document (`AssertionKeySet.jwks`) of that one key.
/// - `sign --private-key HEX --kid K --issuer I --audience A --account NAME [--tenant T] [--lifetime S]
///   [--jwks-out FILE]`: prints a token; with `--jwks-out`, also writes the JWKS document of the signing key's
///   public key (under `K`) to FILE.
/// - `verify (--public-key HEX --kid K | --jwks FILE) --issuer I --audience A [--mode single-use|reusable]`:
///   reads tokens from standard input, one per line, and prints for each `accepted "ACCOUNT" "TENANT"` (`-` for
///   no tenant) or `refused CODE "DESCRIPTION"` (one verifier for the whole input, so with the default
///   single-use mode a repeated token is a replay). With `--jwks`, the keys are read from the JWKS document in
///   FILE; a document the reader refuses prints `refused 18 "DESCRIPTION"` to standard error and fails the
///   command before any token is read. Account, tenant and description are quoted, every
///   character outside printable ASCII (and `"`, `\`) escaped as `\u{HEX}`: one line per token, whatever the
///   token's strings hold.
enum AssertionCommand {
    static func run(_ arguments: ArraySlice<String>) -> Bool {
        var arguments = arguments
        let command = arguments.popFirst() ?? ""
        var options: [String: String] = [:]
        while let flag = arguments.popFirst() {
            guard flag.hasPrefix("--"), let value = arguments.popFirst() else { return fail("expected --name value, got \(flag)") }
            options[String(flag.dropFirst(2))] = value
        }
        let allowed: [String: Set<String>] = [
            "keygen": [], "jwks": ["public-key", "kid"],
            "sign": ["private-key", "kid", "issuer", "audience", "account", "tenant", "lifetime", "jwks-out"],
            "verify": ["issuer", "audience", "public-key", "kid", "jwks", "mode"],
        ]
        if let known = allowed[command], let unknown = options.keys.sorted().first(where: { !known.contains($0) }) {
            return fail("\(command): unknown option --\(unknown)")
        }
        var lifetime = 300.0
        if let text = options["lifetime"] {
            guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
                return fail("--lifetime takes seconds > 0, got '\(text)'")
            }
            lifetime = seconds
        }
        do {
            switch command {
            case "keygen":
                let key = try AssertionSigningKey()
                print("private \(hex(key.rawRepresentation))")
                print("public \(hex(key.publicKey.rawRepresentation))")
            case "jwks":
                guard let keyHex = options["public-key"], let bytes = bytes(keyHex), let kid = options["kid"]
                else { return fail("jwks needs --public-key --kid") }
                print(AssertionKeySet([kid: try AssertionVerificationKey(rawRepresentation: bytes)]).jwks)
            case "sign":
                guard let keyHex = options["private-key"], let bytes = bytes(keyHex), let kid = options["kid"],
                      let issuer = options["issuer"], let audience = options["audience"], let account = options["account"]
                else { return fail("sign needs --private-key --kid --issuer --audience --account") }
                let signer = IdentityAssertionSigner(key: try AssertionSigningKey(rawRepresentation: bytes), keyID: kid, issuer: issuer)
                print(try signer.sign(
                    account: Identity(validating: account), tenant: options["tenant"], audience: audience,
                    lifetime: lifetime))
                if let path = options["jwks-out"] {
                    try Data(AssertionKeySet([kid: signer.key.publicKey]).jwks.utf8).write(to: URL(fileURLWithPath: path))
                }
            case "verify":
                guard let issuer = options["issuer"], let audience = options["audience"]
                else { return fail("verify needs --issuer --audience, and --public-key --kid or --jwks") }
                let mode: IdentityAssertionVerifier.Mode
                switch options["mode"] ?? "single-use" {
                case "single-use": mode = .singleUse
                case "reusable": mode = .reusable
                default: return fail("--mode is single-use or reusable")
                }
                let keySet: AssertionKeySet
                if let path = options["jwks"] {
                    let document = try Data(contentsOf: URL(fileURLWithPath: path))
                    do throws(AssertionError) { keySet = try AssertionKeySet(jwks: document) } catch {
                        return fail("refused \(error.code) \(quoted(error.description))")
                    }
                } else if let keyHex = options["public-key"], let bytes = bytes(keyHex), let kid = options["kid"] {
                    keySet = AssertionKeySet([kid: try AssertionVerificationKey(rawRepresentation: bytes)])
                } else {
                    return fail("verify needs --public-key --kid, or --jwks")
                }
                let verifier = IdentityAssertionVerifier(keySet: keySet, issuers: [issuer], audience: audience, mode: mode)
                while let line = readLine() {
                    let token = line.trimmingCharacters(in: .whitespaces)
                    guard !token.isEmpty else { continue }
                    do throws(AssertionError) {
                        let assertion = try verifier.verify(token)
                        print("accepted \(quoted(assertion.account.name)) \(assertion.tenant.map(quoted) ?? "-")")
                    } catch {
                        print("refused \(error.code) \(quoted(error.description))")
                    }
                }
            default:
                return fail("usage: identity-harness assertion keygen | jwks … | sign … | verify …")
            }
            return true
        } catch {
            return fail("\(error)")
        }
    }

    /// `text` in double quotes, with every scalar outside printable ASCII, `"` and `\` written as `\u{HEX}`.
    static func quoted(_ text: String) -> String {
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

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func bytes(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var result: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            result.append(byte)
        }
        return result
    }

    static func fail(_ message: String) -> Bool {
        FileHandle.standardError.write(Data("assertion: \(message)\n".utf8))
        return false
    }
}
