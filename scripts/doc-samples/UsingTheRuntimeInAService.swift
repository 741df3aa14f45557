// What the samples of "Using the runtime in a service" stand for; see scripts/doc-samples.py. Declarations
// only. The samples of this article import the integration packages: they are checked against
// .build-integrations.
import IdentityAssertions
import IdentityPolicy
import IdentityProtection

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

let policies: PolicyManager = placeholder()

// samples 1, 2
let files: FileProtectionManager = placeholder()
let path: String = placeholder()

// sample 1
let gatewayPublicKey: AssertionVerificationKey = placeholder()

// sample 2
import Vapor

let app: Application = placeholder()
let verifier: IdentityAssertionVerifier = placeholder()

// sample 3
let signer: IdentityAssertionSigner = placeholder()
let auditURL: String = placeholder()
