import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import NIOConcurrencyHelpers
import Testing

extension FleetTests {
    @Suite("PostgresPolicySource")
    struct PolicySourceTests {
        static func document(_ subject: String, encrypted: Bool, tenant: Bool = false) -> String {
            #"{"formatVersion": 1, "\#(tenant ? "tenant" : "account")": "\#(subject)", "fileEncryptionRequired": \#(encrypted)}"#
        }

        @Test("account and tenant rows; a change reaches another instance's PolicyManager within 1 s with its per-account event")
        func propagation() async throws {
            let configuration = try await TestDatabase.make()
            let writerFleet = PostgresFleet(configuration: configuration)
            let readerFleet = PostgresFleet(configuration: configuration)
            defer {
                writerFleet.shutdown()
                readerFleet.shutdown()
            }
            try await writerFleet.waitUntilReady(timeout: 20)
            try await readerFleet.waitUntilReady(timeout: 20)
            let writer = PostgresPolicySource(fleet: writerFleet)
            let reader = PostgresPolicySource(fleet: readerFleet)
            let manager = PolicyManager(policySource: reader)
            let alice = Identity("alice@contoso.com")
            let bob = Identity("bob@contoso.com")
            let events = EventLog()
            let stream = manager.events
            let listener = Task {
                for await event in stream { events.append(event) }
            }
            defer { listener.cancel() }
            try await writer.storeDocument(Self.document("alice@contoso.com", encrypted: false), named: "alice")
            try await writer.storeDocument(Self.document("contoso.com", encrypted: true, tenant: true), named: "tenant-contoso")
            #expect(TestDatabase.eventually(within: 1) { manager.policy(for: alice).isFileEncryptionRequired == false })
            #expect(TestDatabase.eventually(within: 1) { reader.policies.tenants[TenantID("contoso.com")] != nil })
            #expect(manager.policy(for: bob).isFileEncryptionRequired)
            #expect(manager.managedAccounts.contains(alice))
            func aliceEvents() -> Int {
                events.all.filter { if case let .accountPoliciesDidChange(accounts, _) = $0 { accounts.contains(alice) } else { false } }.count
            }
            #expect(TestDatabase.eventually(within: 1) { aliceEvents() >= 1 })
            let seen = aliceEvents()
            try await writer.storeDocument(Self.document("alice@contoso.com", encrypted: true), named: "alice")
            #expect(TestDatabase.eventually(within: 1) { aliceEvents() > seen })
            #expect(manager.policy(for: alice).isFileEncryptionRequired)
            try await writer.deleteDocument(named: "alice")
            #expect(TestDatabase.eventually(within: 1) { reader.policies.accounts[alice] == nil })
        }

        @Test("a malformed row keeps the last good policy and is reported; a duplicate subject is reported; fixing it clears the error")
        func malformed() async throws {
            let configuration = try await TestDatabase.make()
            let fleet = PostgresFleet(configuration: configuration)
            defer { fleet.shutdown() }
            try await fleet.waitUntilReady(timeout: 20)
            let source = PostgresPolicySource(fleet: fleet)
            let carol = Identity("carol@fabrikam.com")
            try await source.storeDocument(Self.document("carol@fabrikam.com", encrypted: false), named: "carol")
            try await source.reload()
            #expect(source.policy(for: carol)?.isFileEncryptionRequired == false)
            try await source.storeDocument(#"{"formatVersion": 1, "account": "carol@fabrikam.com", "fileEncryptionRequired": "#, named: "carol")
            try await source.reload()
            #expect(source.policy(for: carol)?.isFileEncryptionRequired == false)
            #expect(source.errors.contains { $0.path.hasSuffix("/carol") })
            try await source.storeDocument(#"{"formatVersion": 1, "account": "carol@fabrikam.com", "bogus": 1}"#, named: "carol")
            try await source.reload()
            #expect(source.policy(for: carol)?.isFileEncryptionRequired == false)
            #expect(source.errors.contains { if case .unknownKey = $0 { true } else { false } })
            try await source.storeDocument(Self.document("carol@fabrikam.com", encrypted: true), named: "zz-duplicate")
            try await source.storeDocument(Self.document("carol@fabrikam.com", encrypted: true), named: "carol")
            try await source.reload()
            #expect(source.policy(for: carol)?.isFileEncryptionRequired == true)
            #expect(source.errors.count == 1)
            #expect(source.errors.contains { if case .duplicate = $0 { true } else { false } })
            // A row malformed from the start leaves the account it names undecided, never unmanaged.
            let erin = Identity("erin@fabrikam.com")
            try await source.storeDocument(#"{"formatVersion": 1, "account": "erin@fabrikam.com", "pinRequired": "yes"}"#, named: "erin")
            try await source.reload()
            #expect(source.policies.resolution(for: erin) == .undecided)
            #expect(source.errors.contains { $0.path.hasSuffix("/erin") && $0.key == "pinRequired" && $0.position != nil })
            #expect(source.policies.isComplete)
            // One whose subject cannot be read leaves every account without a good row of its own undecided.
            try await source.storeDocument("not json", named: "dave")
            try await source.reload()
            #expect(source.errors.contains { $0.path.hasSuffix("/dave") })
            #expect(source.policies.resolution(for: Identity("dave@example.org")) == .undecided)
            #expect(source.policy(for: carol)?.isFileEncryptionRequired == true)
            #expect(source.lastError == nil)
            // Deleted, the refusals end.
            try await source.deleteDocument(named: "dave")
            try await source.deleteDocument(named: "erin")
            try await source.reload()
            #expect(source.policies.resolution(for: erin) == .none)
            #expect(source.policies.resolution(for: Identity("dave@example.org")) == .none)
        }

        @Test("a manager over the table refuses a broken row's account with 115 and lists the error")
        func brokenRowRefuses() async throws {
            let configuration = try await TestDatabase.make()
            let fleet = PostgresFleet(configuration: configuration)
            defer { fleet.shutdown() }
            try await fleet.waitUntilReady(timeout: 20)
            let source = PostgresPolicySource(fleet: fleet)
            try await source.storeDocument(#"{"formatVersion": 1, "tenant": "contoso.com", "fileEncryptionRequired": "yes"}"#, named: "contoso")
            try await source.reload()
            let manager = PolicyManager(policySource: source)
            let alice = Identity("alice@contoso.com")
            guard case .policyUnavailable = manager.refusal(of: .create, to: alice) else {
                Issue.record("alice@contoso.com is not refused: \(String(describing: manager.refusal(of: .create, to: alice)))")
                return
            }
            #expect(manager.policyErrors.contains { $0.key == "fileEncryptionRequired" })
            #expect(!manager.isDataTransferAllowed(from: alice, to: Identity("bob@fabrikam.com")))
        }
    }
}

/// The events a manager posted, in order.
final class EventLog: Sendable {
    private let events = NIOLockedValueBox<[PolicyEvent]>([])

    func append(_ event: PolicyEvent) {
        events.withLockedValue { $0.append(event) }
    }

    var all: [PolicyEvent] {
        events.withLockedValue { $0 }
    }
}
