import Foundation
import IdentityPolicy
import IdentityRuntime
import Testing

@Suite("RuntimeSettings")
struct RuntimeSettingsTests {
    @Test("defaults: single identity, 24 h retry, 8 h refresh")
    func defaults() {
        let settings = RuntimeSettings()
        #expect(!settings.multiIdentity)
        #expect(!settings.autoEnrollOnLaunch)
        #expect(!settings.policyRequired)
        #expect(settings.enrollmentRetryInterval == 86_400)
        #expect(settings.policyRefreshInterval == 28_800)
        #expect(settings.allowedAccounts == nil)
        #expect(settings.policyDirectory == nil)
        #expect(settings.admissionCheckTimeout == 30)
    }

    @Test("every key loads from JSON")
    func everyKey() throws {
        let json = """
        {"multiIdentity": true, "autoEnrollOnLaunch": true, "policyRequired": true,
         "enrollmentRetryInterval": 60, "policyRefreshInterval": 30.5, "delegateTimeout": 2,
         "allowedAccounts": ["Alice@Contoso.com"], "policyDirectory": "/etc/policies", "policyPollInterval": 1,
         "maxManagedAccounts": 3, "dataIsolation": false, "admissionCacheDuration": 0, "admissionRetryInterval": 5,
         "admissionCheckTimeout": 7}
        """
        let settings = try RuntimeSettings(json: Data(json.utf8))
        #expect(settings.multiIdentity && settings.autoEnrollOnLaunch && settings.policyRequired)
        #expect(settings.enrollmentRetryInterval == 60)
        #expect(settings.policyRefreshInterval == 30.5)
        #expect(settings.delegateTimeout == 2)
        #expect(settings.allowedAccounts == [alice])
        #expect(settings.policyDirectory == "/etc/policies")
        #expect(settings.policyPollInterval == 1)
        #expect(settings.maxManagedAccounts == 3)
        #expect(!settings.dataIsolation && settings.admissionCacheDuration == 0 && settings.admissionRetryInterval == 5)
        #expect(settings.admissionCheckTimeout == 7)
        #expect(RuntimeSettings.keys.count == 14)
    }

    @Test("an empty object gives the defaults")
    func empty() throws {
        #expect(try RuntimeSettings(json: Data("{}".utf8)) == RuntimeSettings())
    }

    @Test("unknown keys are errors, typos included", arguments: ["multiIdentityy", "MultiIdentity", "foo"])
    func unknownKey(key: String) {
        #expect(throws: RuntimeSettingsError.unknownKey(key, known: RuntimeSettings.keys)) {
            try RuntimeSettings(json: Data("{\"\(key)\": true}".utf8))
        }
    }

    @Test("wrong types are errors", arguments: [
        ("multiIdentity", "1", "a boolean", "number"),
        ("policyRequired", "\"true\"", "a boolean", "string"),
        ("enrollmentRetryInterval", "true", "a number of seconds", "boolean"),
        ("policyRefreshInterval", "\"8h\"", "a number of seconds", "string"),
        ("policyDirectory", "5", "a string", "number"),
        ("allowedAccounts", "\"alice@contoso.com\"", "an array of account names", "string"),
        ("allowedAccounts", "[1]", "an array of account names", "an array containing number"),
        ("autoEnrollOnLaunch", "null", "a boolean", "null"),
        ("maxManagedAccounts", "\"1\"", "a whole number of accounts", "string"),
    ])
    func wrongType(key: String, value: String, expected: String, found: String) {
        #expect(throws: RuntimeSettingsError.wrongType(key: key, expected: expected, found: found)) {
            try RuntimeSettings(json: Data("{\"\(key)\": \(value)}".utf8))
        }
    }

    @Test("out-of-range values are errors", arguments: [
        "{\"enrollmentRetryInterval\": 0}", "{\"delegateTimeout\": -1}", "{\"policyDirectory\": \"\"}",
        "{\"allowedAccounts\": [\"\"]}", "{\"maxManagedAccounts\": 0}", "{\"maxManagedAccounts\": 1.5}",
        "{\"maxManagedAccounts\": -3}", "{\"maxManagedAccounts\": 1e300}", "{\"admissionCheckTimeout\": 0}",
    ])
    func invalidValue(json: String) {
        #expect {
            try RuntimeSettings(json: Data(json.utf8))
        } throws: { error in
            guard case .invalidValue = error as? RuntimeSettingsError else { return false }
            return true
        }
    }

    @Test("malformed JSON and non-objects are errors")
    func malformed() {
        #expect {
            try RuntimeSettings(json: Data("{\"multiIdentity\": tru".utf8))
        } throws: { error in
            guard case .malformedJSON = error as? RuntimeSettingsError else { return false }
            return true
        }
        #expect(throws: RuntimeSettingsError.notAnObject(found: "array")) {
            try RuntimeSettings(json: Data("[]".utf8))
        }
    }

    @Test("loads from a file; a missing file is unreadable")
    func file() throws {
        let directory = try TemporaryDirectory()
        try directory.write("settings.json", "{\"multiIdentity\": true}")
        #expect(try RuntimeSettings(contentsOfFile: directory.file("settings.json")).multiIdentity)
        #expect {
            try RuntimeSettings(contentsOfFile: directory.file("missing.json"))
        } throws: { error in
            guard case .unreadable = error as? RuntimeSettingsError else { return false }
            return true
        }
    }
}
