// Writes the seed corpora of the fuzz targets into Corpus/<target>/ (run from the Fuzz directory:
// `swift run make-seeds`). The seeds are committed; rerun after a format change. The `legacy-v1-*` seeds of
// FuzzEncryptedFile are encrypted files of format version 1 (read, never written since version 2), written
// with the same fixed key by a build before format version 2; this program leaves them as they are.
import Foundation
import FuzzSupport
import IdentityAssertions
import IdentityProtection
import IdentityRuntime

let corpus = FileManager.default.currentDirectoryPath + "/Corpus"
let alice = FuzzFixture.alice
let carol: Identity = "carol@fabrikam.com"

func save(_ target: String, _ name: String, _ bytes: some DataProtocol) throws {
    let directory = corpus + "/" + target
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try Data(bytes).write(to: URL(fileURLWithPath: directory + "/" + name))
}

let data = FuzzFixture.data
let files = FuzzFixture.files(chunkSize: 16)
let scratch = FuzzFixture.directory + "/root"
let payload = Data((0..<40).map { UInt8(truncatingIfNeeded: $0 &* 7) })

// Envelopes and streams.
try save("FuzzEnvelope", "plain", Data("hello".utf8))
try save("FuzzEnvelope", "envelope-empty", try data.protect(Data(), owner: alice))
try save("FuzzEnvelope", "envelope-40", try data.protect(payload, owner: alice))
try save("FuzzEnvelope", "envelope-unmanaged", try data.protect(payload, owner: carol))
try payload.write(to: URL(fileURLWithPath: scratch + "/payload"))
for (name, owner, size) in [("stream-40", alice, 40), ("stream-empty", alice, 0), ("stream-clear", carol, 40)] {
    try payload.prefix(size).write(to: URL(fileURLWithPath: scratch + "/payload"))
    try files.protect(atPath: scratch + "/payload", toPath: scratch + "/sealed", owner: owner, chunkSize: 16)
    try save("FuzzEnvelope", name, try Data(contentsOf: URL(fileURLWithPath: scratch + "/sealed")))
}

// Encrypted files: whole-file writes and a ProtectedFile whose chunks use both slots.
try save("FuzzEncryptedFile", "plain", Data("hello".utf8))
for size in [0, 5, 40] {
    try payload.prefix(size).write(to: URL(fileURLWithPath: scratch + "/f"))
    try files.encryptFile(atPath: scratch + "/f", owner: alice)
    try save("FuzzEncryptedFile", "encrypted-\(size)", try Data(contentsOf: URL(fileURLWithPath: scratch + "/f")))
    try FileManager.default.removeItem(atPath: scratch + "/f")
}
let file = try files.openProtectedFile(atPath: scratch + "/p", options: [.read, .write, .create], owner: alice)
try file.write(Array(payload))
try file.write([9, 9, 9], at: 3)
try file.truncate(to: 20)
try file.write([1, 2, 3, 4], at: 30)
try file.close()
try save("FuzzEncryptedFile", "protected-rewritten", try Data(contentsOf: URL(fileURLWithPath: scratch + "/p")))

// Policy documents and settings.
try save("FuzzPolicyDocument", "account", Data("""
{"formatVersion": 1, "account": "alice@contoso.com", "saveToLocations": ["oneDriveForBusiness", "sharePoint"],
 "openFromLocations": ["camera", "accountDocument"], "fileEncryptionRequired": true,
 "notificationPolicy": "blockOrgData", "appSharingAllowed": false, "pinRequired": true,
 "appConfiguration": {"serverURL": "https://contoso.example", "maxItems": 5}}
""".utf8))
try save("FuzzPolicyDocument", "tenant", Data(#"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": false}"#.utf8))
try save("FuzzSettings", "every-key", Data("""
{"multiIdentity": true, "autoEnrollOnLaunch": true, "policyRequired": true, "enrollmentRetryInterval": 60,
 "policyRefreshInterval": 30.5, "delegateTimeout": 2, "allowedAccounts": ["Alice@Contoso.com"],
 "policyDirectory": "/etc/policies", "policyPollInterval": 1, "maxManagedAccounts": 1}
""".utf8))
try save("FuzzSettings", "empty", Data("{}".utf8))
// JWKS documents: one key, two keys, every optional member, and refusals (a private key, an RSA key, a
// duplicate kid) so that the fuzzer starts next to each rule.
let jwkKeyA = try AssertionSigningKey(rawRepresentation: [UInt8](repeating: 1, count: 32))
let jwkKeyB = try AssertionSigningKey(rawRepresentation: [UInt8](repeating: 2, count: 32))
let jwkX = AssertionKeySet(["a": jwkKeyA.publicKey]).jwks
try save("FuzzJWKS", "one-key", Data(jwkX.utf8))
try save("FuzzJWKS", "two-keys", Data(AssertionKeySet(["a": jwkKeyA.publicKey, "caf\u{e9}": jwkKeyB.publicKey]).jwks.utf8))
try save("FuzzJWKS", "empty", Data(#"{"keys":[]}"#.utf8))
let x = jwkX.split(separator: "\"").dropLast().last.map(String.init) ?? ""
try save("FuzzJWKS", "optional-members", Data("""
{"issuer":"frontend","keys":[{"kty":"OKP","crv":"Ed25519","x":"\(x)","kid":"k\\u00e9","alg":"EdDSA","use":"sig",
 "key_ops":["verify"],"ext":true,"iat":1800000000,"note":{"a":[1,-2,"x",null,false]}}]}
""".utf8))
try save("FuzzJWKS", "private-key", Data(#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"\#(x)","d":"\#(x)","kid":"a"}]}"#.utf8))
try save("FuzzJWKS", "rsa-key", Data(#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r","alg":"RS256"}]}"#.utf8))
try save("FuzzJWKS", "duplicate-kid", Data(#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"\#(x)","kid":"a"},{"kty":"OKP","crv":"Ed25519","x":"\#(x)","kid":"a"}]}"#.utf8))
try? FileManager.default.removeItem(atPath: FuzzFixture.directory)
print("seeds written to \(corpus)")
