import GRPCCore
import IdentityAssertions
import IdentityGRPC
import IdentityHTTP
import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("IdentityProblem: one mapping from the HTTP edge's problems to gRPC statuses")
struct IdentityProblemTests {
    static let mapped: [(IdentityHTTPProblem, RPCError.Code)] = [
        (.missingToken(), .unauthenticated),
        (.token(.badSignature), .unauthenticated),
        (.token(.replayed(tokenID: "t1")), .unauthenticated),
        (.tenantMismatch(claimed: "fabrikam.com", known: "contoso.com"), .unauthenticated),
        (.token(.replayCacheFull), .unavailable),
        (.token(.cryptoBackendFailure("x")), .internalError),
        (.admission(AdmissionError(account: alice, result: .notAllowed, cause: .blocked(.clockedOut))), .permissionDenied),
        (.admission(AdmissionError(account: alice, result: .notAllowed, cause: .notInAllowedAccounts)), .permissionDenied),
        (.admission(AdmissionError(account: alice, result: .failed, cause: .unavailable("later"))), .unavailable),
        (IdentityHTTPProblem(status: 429, code: "slow-down", title: "t", detail: "d", tokenWasSent: true), .resourceExhausted),
        (IdentityHTTPProblem(status: 418, code: "teapot", title: "t", detail: "d", tokenWasSent: true), .unknown),
    ]

    @Test("status by HTTP status, message \"code: detail\", metadata, and the problem read back unchanged", arguments: mapped)
    func mapping(_ problem: IdentityHTTPProblem, _ code: RPCError.Code) throws {
        let error = IdentityProblem(problem).rpcError
        #expect(error.code == code)
        #expect(error.message == "\(problem.code): \(problem.detail)")
        #expect(Array(error.metadata[stringValues: IdentityProblem.codeMetadataKey]) == [problem.code])
        #expect(Array(error.metadata[binaryValues: IdentityProblem.documentMetadataKey]) == [problem.json])
        for header in problem.headers {
            #expect(Array(error.metadata[stringValues: header.name.lowercased()]) == [header.value])
        }
        let back = try #require(IdentityProblem(error))
        #expect(back.problem == problem)
    }

    @Test("an RPCError without the problem metadata is no identity problem")
    func notAProblem() {
        #expect(IdentityProblem(RPCError(code: .unauthenticated, message: "missing-token: forged")) == nil)
    }
}
