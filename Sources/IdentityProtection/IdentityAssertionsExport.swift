// The identity assertions (`IdentityAssertion`, `IdentityAssertionSigner`, `IdentityAssertionVerifier`, their
// keys, `AssertionKeySet`, `AssertionError`) moved to their own module, IdentityAssertions. Re-exported here for
// one release, so that code importing only IdentityProtection still compiles; deprecated (see CHANGELOG.md):
// depend on the IdentityAssertions product and `import IdentityAssertions` instead.
@_exported import IdentityAssertions
