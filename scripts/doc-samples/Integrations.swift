// What the samples of "Integrations" stand for; see scripts/doc-samples.py. Declarations only. The samples of
// this article import the integration packages: they are checked against .build-integrations.

// sample 2
import HTTPTypes
import IdentityAssertions
import Instrumentation

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

let peerKey: AssertionVerificationKey = placeholder()
let request: HTTPRequest = placeholder()
/// The service's HTTP client.
final class Client: Sendable {
    func send(_ request: HTTPRequest) async throws {}
}
let client: Client = placeholder()
/// swift-distributed-tracing's carrier adapters for `HTTPFields`, as the service writes them.
struct HeadersExtractor: Extractor {
    func extract(key: String, from carrier: HTTPFields) -> String? { placeholder() }
}
struct HeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout HTTPFields) {}
}

// sample 3
import Hummingbird
import IdentityAssertions
import IdentityPolicy
import Logging
import ServiceLifecycle

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

let root: String = placeholder()
let keysPath: String = placeholder()
let state: String = placeholder()
let policies: PolicyManager = placeholder()
let gatewayKey: AssertionVerificationKey = placeholder()
@MainActor let router: Router<BasicRequestContext> = placeholder()   // built by the service's main code
let application: any Service = placeholder()
let logger: Logger = placeholder()

// samples 4, 5, 6
import IdentityAssertions
import IdentityPolicy
import IdentityProtection

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

let verifier: IdentityAssertionVerifier = placeholder()
let policies: PolicyManager = placeholder()

// samples 4, 5
let files: FileProtectionManager = placeholder()
let path: String = placeholder()

// sample 5
import Vapor

let app: Application = placeholder()

// sample 6
import GRPCCore
import GRPCInProcessTransport

let signer: IdentityAssertionSigner = placeholder()
let transport: InProcessTransport = placeholder()
let documentService: any RegistrableRPCService = placeholder()
struct ReadRequest: Sendable {}
let request: ReadRequest = placeholder()
/// What protoc-gen-grpc-swift generates for the service's `.proto` file.
enum Documents {
    struct Client<Transport: ClientTransport>: Sendable {
        init(wrapping client: GRPCClient<Transport>) {}
        func read(_ request: ReadRequest) async throws -> String { placeholder() }
    }
}

// sample 7
import IdentityAssertions

let token: String = "a compact JWS"

// sample 8
import IdentityPolicy
import Logging
import ServiceLifecycle

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

let settings: RuntimeSettings = placeholder()
let enrollmentService: any EnrollmentService = placeholder()
let server: any Service = placeholder()
let logger: Logger = placeholder()
