import IdentityProtection
import IdentityRuntime

/// Every policy decision a ``PolicyManager`` makes, each from the state alone (<doc:AccountsAndPolicies>,
/// <doc:ServiceBoundary>). The manager's public methods take its lock, call one of these and carry out the
/// answer.
extension PolicyState {
    // MARK: Blocks

    /// Why `account` is blocked (its first cause, else its policy's), or `nil`.
    func blockReason(for account: Identity) -> BlockAccountReason? {
        blocks.reason(for: account, standing: accounts.standing(of: account), tenant: accounts.tenant(of: account))
    }

    /// ``blockReason(for:)`` but for a wipe of the account's tenant: the block that blocking and unblocking
    /// announce (a tenant's wipe is not announced per account).
    func announcedBlockReason(for account: Identity) -> BlockAccountReason? {
        blocks.reason(for: account, standing: accounts.standing(of: account))
    }

    // MARK: Switches

    /// The first switch rule for one account.
    enum SwitchStanding { case refused, managed, unmanaged }

    /// The first switch rule (<doc:AccountsAndPolicies>) for one account: refused when blocked, outside
    /// ``RuntimeSettings/allowedAccounts`` or claimed; otherwise managed (its checks run) or unmanaged
    /// (switches at once).
    ///
    /// The same rule as `blockReason(for:) != nil` plus the allow list and the claim, with one lookup of the
    /// account's standing (and none of its block causes while no account has any).
    func switchStanding(of identity: Identity) -> SwitchStanding {
        guard !identity.isUnmanaged else { return .unmanaged }
        if !blocks.isEmpty, blocks.reason(for: identity, tenant: accounts.tenant(of: identity)) != nil { return .refused }
        if let allowed = settings.allowedAccounts, !allowed.contains(identity) { return .refused }
        switch accounts.standing(of: identity) {
        case .claimed, .undecided: return .refused
        case let .managed(policy): return policy.isAccountBlocked ? .refused : .managed
        case nil: return .unmanaged
        }
    }

    // MARK: Undecided accounts

    /// Why `account`'s policy cannot be decided now, or `nil` when it can: the policy source has not loaded,
    /// or a document that may govern the account cannot be read (<doc:AccountsAndPolicies>). Either way nobody
    /// can tell whether, or how, the account is managed, so its data is refused.
    func undecidedReason(for account: Identity) -> String? {
        guard !account.isUnmanaged else { return nil }
        guard policiesLoaded else { return "the policy source has not loaded yet: \(account.debugDescription) may be managed" }
        guard accounts.isUndecided(account) else { return nil }
        return "a policy document that may govern \(account.debugDescription) cannot be read (see PolicyManager.policyErrors); its data is refused until the document is fixed or removed"
    }

    /// The refusal of `access` to data of `owner` that an undecided account takes part in: the owner, or the
    /// account the data would go to or be created for. Reads by an undecided account fall to the usual rule
    /// (it is managed under no policy known now, so a managed owner's policy gives it nothing but `any`).
    func undecidedRefusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        if let reason = undecidedReason(for: owner) { return .policyUnavailable(reason: reason) }
        if case let .transfer(recipient) = access, let recipient, let reason = undecidedReason(for: recipient) {
            return .policyUnavailable(reason: reason)
        }
        return nil
    }

    // MARK: Transfers and access

    /// ``PolicyManager/isDataTransferAllowed(from:to:)``.
    func isDataTransferAllowed(from source: Identity?, to target: Identity?) -> Bool {
        // Before the policies loaded nobody knows who is managed: only unowned data goes to no identity.
        guard policiesLoaded else { return (source?.isUnmanaged ?? true) && (target?.isUnmanaged ?? true) }
        for side in [source, target] {
            // Nothing goes to or comes from an account whose policy cannot be read, as for a blocked one.
            if let side, undecidedReason(for: side) != nil { return false }
            if let side, !side.isUnmanaged, blockReason(for: side) != nil { return false }
        }
        guard let source, !source.isUnmanaged else { return true }
        return isTransferAllowed(from: source, to: target)
    }

    /// Whether data of `source` (an account) may go to `target` under `source`'s policy, blocks included.
    func isTransferAllowed(from source: Identity, to target: Identity?) -> Bool {
        let policy: Policy
        switch accounts.standing(of: source) {
        case let .managed(found): policy = found
        // Nobody can tell where an undecided account's data may go, not even to itself.
        case .undecided: return false
        case .claimed, nil: return true
        }
        if target == source { return blockReason(for: source) == nil }
        if blockReason(for: source) != nil { return false }
        if let target, !target.isUnmanaged, blockReason(for: target) != nil { return false }
        switch policy.dataTransfer {
        case .none:
            return false
        case .any:
            return true
        case .managedAccounts, .sameTenant:
            guard let target, !target.isUnmanaged, accounts.isManaged(target) else { return false }
            return policy.dataTransfer == .managedAccounts || accounts.tenant(of: target) == accounts.tenant(of: source)
        }
    }

    /// The refusal of `access` to data of `owner` while nobody can decide it: before the policy source's first
    /// load, or while an account it involves is undecided. The first rule of ``refusal(of:to:)``.
    func unavailability(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        guard policiesLoaded else {
            return .policyUnavailable(reason: "the policy source has not loaded yet: \(owner.debugDescription) may be managed")
        }
        return undecidedRefusal(of: access, to: owner)
    }

    /// ``PolicyManager/policy(for:)`` of an account.
    func policy(of identity: Identity) -> Policy {
        guard !identity.isUnmanaged else { return .unrestricted }
        return Self.policy(of: identity, standing: accounts.standing(of: identity))
    }

    /// The policy of `identity`, a managed or unknown account, given its standing.
    private static func policy(of identity: Identity, standing: AccountIndex.Standing?) -> Policy {
        switch standing {
        case let .managed(policy): return policy
        case .undecided: return .locked(for: identity)
        case .claimed, nil: return .unrestricted
        }
    }

    /// ``PolicyManager/boundaryStanding(of:)``, with the account's standing looked up once for all three answers.
    func boundaryStanding(of account: Identity) -> BoundaryStanding {
        guard !account.isUnmanaged else {
            return BoundaryStanding(
                tenant: accounts.tenant(of: account), policy: .unrestricted,
                unavailable: unavailability(of: .create, to: account))
        }
        let standing = accounts.standing(of: account)
        let isUndecided = if case .undecided = standing { true } else { false }
        return BoundaryStanding(
            tenant: accounts.tenant(of: account), policy: Self.policy(of: account, standing: standing),
            // Decided (the usual case) needs no second look; otherwise the refusal says why.
            unavailable: policiesLoaded && !isUndecided ? nil : unavailability(of: .create, to: account))
    }

    /// ``PolicyManager/refusal(of:to:)``: the one access rule behind every protected read and write.
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        if let unavailable = unavailability(of: access, to: owner) { return unavailable }
        if let reason = blockReason(for: owner) {
            return .accountBlocked(identity: owner, reason: reason.rawValue)
        }
        switch access {
        case .create:
            return nil
        case let .read(reader), let .modify(writer: reader):
            // A blocked account reads and changes no owned data, managed or not (as isDataTransferAllowed
            // answers false for it), isolation on or off; the owner's own data included (accountBlocked above
            // when the owner is the blocked one).
            if let reader, !reader.isUnmanaged, blockReason(for: reader) != nil {
                return access.denial(of: owner)
            }
            // Whoever may not read an account's data may not modify it.
            guard settings.dataIsolation, !isTransferAllowed(from: owner, to: reader) else { return nil }
            return access.denial(of: owner)
        case let .transfer(recipient):
            if let recipient, !recipient.isUnmanaged, let reason = blockReason(for: recipient) {
                return .accountBlocked(identity: recipient, reason: reason.rawValue)
            }
            return isTransferAllowed(from: owner, to: recipient) ? nil : access.denial(of: owner)
        }
    }

    // MARK: Admission

    /// What an admission decides under the lock.
    enum AdmissionDecision {
        case admitted
        case refused(AdmissionError)
        /// Run the checks (``AdmissionStateMachine/Step/lead(_:_:)``) or wait for a run (`join`).
        case checks(AdmissionStateMachine.Step)
    }

    /// Steps 0 to 2 of ``PolicyManager/withAdmittedIdentity(_:reason:isolation:operation:)`` for `account` at
    /// `now` (uptime nanoseconds): the refusals, then the admission state machine for a managed account.
    mutating func admissionStep(for account: Identity, at now: UInt64) -> AdmissionDecision {
        if let decided = admissionBeforeChecks(for: account, at: now) { return decided }
        switch admission.start(for: account, at: now, timeout: settings.admissionCheckTimeout) {
        case .admitted: return .admitted
        case let step: return .checks(step)
        }
    }

    /// ``admissionStep(for:at:)`` when it decides without running or joining a run of the checks (a pass still
    /// trusted, no checks, or a decision before them); `nil` when the checks must run. Changes nothing.
    func admissionStepWithoutChecks(for account: Identity, at now: UInt64) -> AdmissionDecision? {
        if let decided = admissionBeforeChecks(for: account, at: now) { return decided }
        return admission.admitsWithoutChecks(account, at: now) ? .admitted : nil
    }

    /// The refusal of `account` once a run of its checks has passed, decided again from the state as it is
    /// now: the checks take time, and meanwhile the account may have been blocked (by a wipe, an operator, a
    /// policy, a denial of checks that replaced the ones that passed), left the allowed accounts, been claimed
    /// or become undecided. A block refuses whatever its cause: a pass that lifts a denial's block has lifted
    /// it before this is asked.
    func admissionRefusalAfterChecks(for account: Identity) -> AdmissionError? {
        guard case let .refused(error)? = admissionBeforeChecks(for: account, at: 0, exemptingRetries: false) else {
            return nil
        }
        return error
    }

    /// Steps 0 and 1 and the standing of `account`: its decision, or `nil` for a managed account, which the
    /// admission state machine decides. With `exemptingRetries`, an account blocked only by a denial older
    /// than the retry interval is not refused (its checks run again).
    private func admissionBeforeChecks(
        for account: Identity, at now: UInt64, exemptingRetries: Bool = true
    ) -> AdmissionDecision? {
        guard !account.isUnmanaged else { return .admitted }
        // Before the policy source's first load nothing tells a managed account from an unmanaged one, or
        // a blocked one from an allowed one: nobody is admitted (deny by default).
        guard policiesLoaded else {
            return .refused(AdmissionError(
                account: account, result: .failed, cause: .unavailable("the policy source has not loaded its policies yet")))
        }
        // One lookup of the standing for the whole decision: a standing carries the account's policy, which
        // every copy retains and releases field by field.
        let standing = accounts.standing(of: account)
        if let block = blocks.reason(for: account, standing: standing, tenant: accounts.tenant(of: account)),
           !(exemptingRetries && retriesDenial(of: account, standing: standing, at: now)) {
            return .refused(AdmissionError(account: account, result: .notAllowed, cause: .blocked(block)))
        }
        if let allowed = settings.allowedAccounts, !allowed.contains(account) {
            return .refused(AdmissionError(account: account, result: .notAllowed, cause: .notInAllowedAccounts))
        }
        switch standing {
        case nil: return .admitted
        case .claimed: return .refused(AdmissionError(account: account, result: .notAllowed, cause: .claimed))
        case .undecided:
            // As before the first load: nobody can tell whether, or how, the account is managed.
            return .refused(AdmissionError(
                account: account, result: .failed, cause: .unavailable(undecidedReason(for: account) ?? "its policy cannot be read")))
        case .managed: return nil
        }
    }

    /// Whether an admission at `now` runs the checks of `account` again although it is blocked: its only
    /// cause is a denial older than the retry interval, and its policy does not block it.
    private func retriesDenial(of account: Identity, standing: AccountIndex.Standing?, at now: UInt64) -> Bool {
        guard blocks.causes(of: account, tenant: accounts.tenant(of: account)) == [.admissionCheckFailed] else { return false }
        if case let .managed(policy) = standing, policy.isAccountBlocked { return false }
        return admission.retriesDenial(of: account, at: now, retryInterval: settings.admissionRetryInterval)
    }
}
