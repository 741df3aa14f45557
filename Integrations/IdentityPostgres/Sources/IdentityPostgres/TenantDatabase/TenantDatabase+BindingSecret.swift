import Foundation

extension TenantDatabase {
    /// The secret that lets the runtime, and only the runtime, bind a transaction to an account and tenant.
    ///
    /// `identity_rls.bind(account, tenant, secret)` refuses unless the SHA-256 of `secret` is the verifier
    /// stored by ``TenantDatabase/install(on:serviceRole:secret:logger:)``. The secret is sent as a bound
    /// parameter of that one statement: SQL run later on the connection cannot read it back, so it cannot bind
    /// another tenant. Keep it with the service's other secrets (an environment variable or a secret store), as
    /// ``base64``; it is never written to the database, only its digest.
    ///
    /// Its `description` does not show the bytes.
    public struct BindingSecret: Sendable, Equatable, CustomStringConvertible {
        /// The secret's length: 32 bytes (256 bits).
        public static let byteCount = 32

        let bytes: [UInt8]

        /// A new random secret, from the system's cryptographically secure generator.
        public static func generate() -> BindingSecret {
            var generator = SystemRandomNumberGenerator()
            return BindingSecret(bytes: (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        }

        private init(bytes: [UInt8]) {
            self.bytes = bytes
        }

        /// The secret from its ``base64`` text.
        /// - Throws: ``TenantDatabaseError/unsafeConfiguration(reason:)`` when the text is not base64 of 32 bytes.
        public init(base64: String) throws(TenantDatabaseError) {
            guard let data = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)),
                  data.count == Self.byteCount else {
                throw .unsafeConfiguration(reason: "a binding secret is base64 of \(Self.byteCount) bytes")
            }
            bytes = Array(data)
        }

        /// The secret as base64 text, to store in the service's configuration.
        public var base64: String { Data(bytes).base64EncodedString() }

        public var description: String { "BindingSecret(redacted)" }
    }
}
