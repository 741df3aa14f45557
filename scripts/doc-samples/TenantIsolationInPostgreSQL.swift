// What the samples of "Tenant isolation in PostgreSQL" stand for; see scripts/doc-samples.py. Declarations
// only. The samples of this article import IdentityPostgres: they are checked against .build-integrations.
import IdentityPolicy
import IdentityPostgres
import Logging
import PostgresNIO

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

let logger: Logger = placeholder()

// sample 1
let serviceRoleConfiguration: PostgresClient.Configuration = placeholder()
let environment: [String: String] = placeholder()
let policies: PolicyManager = placeholder()

// sample 2
let database: TenantDatabase = placeholder()

// sample 3
let ownerConnection: PostgresConnection = placeholder()

// sample 4
let tenantConnection: PostgresClient.Configuration = placeholder()
let rolesSecretText: String = placeholder()
let superuserConnection: PostgresConnection = placeholder()
let bindingSecret: TenantDatabase.BindingSecret = placeholder()
let policies: PolicyManager = placeholder()
