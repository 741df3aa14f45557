// What the sample of "Running a fleet" stands for; see scripts/doc-samples.py. Declarations only. It imports
// IdentityPostgres: it is checked against .build-integrations.
import Foundation
import IdentityRuntime
import Logging
import ServiceLifecycle

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

let body: Data = placeholder()
let account: Identity = placeholder()
let server: any Service = placeholder()
let logger: Logger = placeholder()
