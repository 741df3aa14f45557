// What the samples of "The service boundary" stand for; see scripts/doc-samples.py. Declarations only.
import Foundation
import IdentityAssertions
import IdentityPolicy
import IdentityProtection
import IdentityRuntime

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

// sample 1
let settings: RuntimeSettings = placeholder()
let keys: any KeyStore = placeholder()
final class TokenCache: Sendable {
    func isFresh(_ account: Identity) async -> Bool { placeholder() }
}
let tokens: TokenCache = placeholder()
let account: Identity = placeholder()
let path: String = placeholder()

// sample 2
let signingKey: AssertionSigningKey = placeholder()
let fetched: String = placeholder()
let fetchedAgain: String = placeholder()
