import IdentityPolicy
import Testing

@Suite("Anchor raw values")
struct ResultCodesTests {
    @Test("SwitchIdentityResult raw values", arguments: [
        (SwitchIdentityResult.success, 0), (.canceled, 1), (.notAllowed, 2), (.failed, 3),
    ])
    func switchResults(result: SwitchIdentityResult, raw: Int) {
        #expect(result.rawValue == raw)
        #expect(SwitchIdentityResult(rawValue: raw) == result)
    }

    @Test("AddIdentityResult raw values", arguments: [(AddIdentityResult.success, 0), (.failed, 1)])
    func addResults(result: AddIdentityResult, raw: Int) {
        #expect(result.rawValue == raw)
    }

    @Test("IdentitySwitchReason raw values", arguments: [
        (IdentitySwitchReason.openURL, 0), (.cancelConditionalLaunch, 1), (.documentImport, 2),
    ])
    func reasons(reason: IdentitySwitchReason, raw: Int) {
        #expect(reason.rawValue == raw)
    }

    @Test("results and reasons describe themselves by their case names")
    func descriptions() {
        #expect(SwitchIdentityResult.allCases.map(\.description) == ["success", "canceled", "notAllowed", "failed"])
        #expect(IdentitySwitchReason.allCases.map(\.description) == ["openURL", "cancelConditionalLaunch", "documentImport"])
    }

    @Test("NotificationPolicy raw values")
    func notificationPolicy() {
        #expect(NotificationPolicy.allow.rawValue == 0)
        #expect(NotificationPolicy.blockOrgData.rawValue == 1)
        #expect(NotificationPolicy.block.rawValue == 2)
    }

    @Test("SaveLocation bits", arguments: [
        (SaveLocation.other, 0), (.oneDriveForBusiness, 1), (.sharePoint, 2), (.box, 4), (.dropbox, 8),
        (.googleDrive, 16), (.localDrive, 32), (.cameraRoll, 64), (.accountDocument, 128), (.iManage, 256),
        (.egnyte, 512),
    ])
    func saveLocations(location: SaveLocation, raw: Int) {
        #expect(location.rawValue == raw)
    }

    @Test("OpenLocation bits", arguments: [
        (OpenLocation.other, 0), (.oneDriveForBusiness, 1), (.sharePoint, 2), (.camera, 4), (.localStorage, 8),
        (.photos, 16), (.accountDocument, 32), (.box, 64), (.iManage, 128), (.egnyte, 256),
    ])
    func openLocations(location: OpenLocation, raw: Int) {
        #expect(location.rawValue == raw)
    }

    @Test("EnrollmentStatusCode: 100...104 succeed, 200...227 fail, no gaps")
    func enrollmentCodes() {
        let raw = EnrollmentStatusCode.allCases.map(\.rawValue)
        #expect(raw == Array(100...104) + Array(200...227))
        #expect(EnrollmentStatusCode.allCases.filter(\.isSuccess).map(\.rawValue) == Array(100...104))
        #expect(EnrollmentStatusCode.newPoliciesReceived.rawValue == 100)
        #expect(EnrollmentStatusCode.unenrollmentSuccess.rawValue == 104)
        #expect(EnrollmentStatusCode.accountNotLicensed.rawValue == 200)
        #expect(EnrollmentStatusCode.alreadyEnrolled.rawValue == 208)
        #expect(EnrollmentStatusCode.notEnrolledAccount.rawValue == 214)
        #expect(EnrollmentStatusCode.timeout.rawValue == 216)
        #expect(EnrollmentStatusCode.singleManagedAccountMode.rawValue == 227)
    }
}
