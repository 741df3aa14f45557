import AsyncHTTPClient
import Foundation
import IdentityRuntime
import NIOCore
import NIOHTTP1
import TenantServiceKit
import Testing

@Suite("TenantService: GET /metrics exports the identity metrics")
struct MetricsRouteTests {
    @Test("an admission and a refusal are counted once, by tenant; no account name in the export")
    func admissionsAndRefusals() async throws {
        try await withServices { client in
            #expect(try await client.send(.PUT, "/v1/docs/\(alice.name)/memo", as: alice, body: "\(alice.name)|memo").status == 200)
            client.services.policies.blockAccount(carol, reason: .clockedOut)
            #expect(try await client.send(.GET, "/v1/docs/\(carol.name)/memo", as: carol).status == 403)
            let metrics = try await client.send(.GET, "/metrics", as: nil)
            #expect(metrics.status == 200)
            #expect(metrics.contentType?.hasPrefix("text/plain") == true)
            let lines = Set(metrics.text.split(separator: "\n").map(String.init))
            #expect(lines.contains(#"identity_admissions_total{tenant="t0.example"} 1"#))
            #expect(lines.contains(
                #"identity_admission_refusals_total{code="2",cause="blocked",block_reason="clockedOut",tenant="t1.example"} 1"#))
            #expect(lines.contains(#"identity_token_verifications_total{outcome="accepted"} 2"#))
            #expect(lines.contains { $0.hasPrefix("identity_key_store_fetches_total{operation=\"currentKey\",outcome=\"found\"}") })
            #expect(!metrics.text.contains(alice.name) && !metrics.text.contains(carol.name))
        }
    }
}
