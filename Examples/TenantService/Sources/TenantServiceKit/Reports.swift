/// The effective file identity seen at each hop of one request, deepest last: an `IdentityDispatchQueue`
/// block, an `IdentityOperationQueue` operation submitted from it, a `Task` created in that operation, and the
/// second service (the audit service), which verified a new assertion signed at the `Task` hop. `"-"` where
/// no identity was seen.
public struct HopReport: Codable, Sendable, Hashable {
    public var queue: String
    public var operation: String
    public var task: String
    public var remote: String

    public init(queue: String, operation: String, task: String, remote: String) {
        self.queue = queue
        self.operation = operation
        self.task = task
        self.remote = remote
    }

    /// Whether every hop saw `account`.
    public func allSaw(_ account: String) -> Bool {
        queue == account && operation == account && task == account && remote == account
    }
}

/// The body of every document-service response: JSON for a success, RFC 9457 problem JSON
/// (`application/problem+json`) for a refusal, both with the account and the hops.
public struct DocumentReport: Codable, Sendable {
    /// The account the request ran for (the admitted one).
    public var account: String
    public var tenant: String
    public var hops: HopReport
    /// For a write or an export: whether the file is encrypted at rest.
    public var encrypted: Bool?
    /// For a read: the document.
    public var content: String?
    /// For an export: where the copy went.
    public var exportedTo: String?
    /// For a wipe: how many files were removed.
    public var removedFiles: Int?
    /// For the `/db` routes: the rows the database answered (a write: the row stored; a read: the document's
    /// row; a listing: every row of the unscoped query), with the tenant and account the database recorded.
    public var rows: [DatabaseRow]?
    // Problem members (RFC 9457) for a refusal.
    public var type: String?
    public var title: String?
    public var status: Int?
    public var detail: String?
    public var code: String?

    public init(account: String, tenant: String, hops: HopReport) {
        self.account = account
        self.tenant = tenant
        self.hops = hops
    }
}

/// The audit service's answer: the account it saw in its handler (under the verified assertion), and that it
/// logged the event.
public struct AuditReport: Codable, Sendable {
    public var account: String
    public var loggedIdentity: String
}

/// The audit service's `GET /summary`: how many lines it logged, how many of them named another identity in
/// their metadata than the account served, and the last line.
public struct AuditSummary: Codable, Sendable {
    public var total: Int
    public var mismatched: Int
    public var lastLine: String?

    public init(total: Int, mismatched: Int, lastLine: String?) {
        self.total = total
        self.mismatched = mismatched
        self.lastLine = lastLine
    }
}
