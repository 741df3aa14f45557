import Dispatch
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting

/// A tenant's policy document as the program last wrote it.
enum PolicyDocumentFile: Sendable, Equatable {
    case good
    /// A broken edit of a good document: the last good one stays in force.
    case brokenEdit(BrokenDocument)
    /// Broken from its first read (written where no document was).
    case brokenFromStart(BrokenDocument)
    case deleted
}

/// The ways the program breaks a document.
enum BrokenDocument: CaseIterable, Sendable {
    /// Not JSON at all (cut in the middle): not even its `tenant` can be read.
    case badJSON
    /// `"fileEncryptionRequired": "yes"`: a string where a boolean belongs.
    case wrongType
    /// A key the format does not have.
    case unknownKey
    /// `"formatVersion": 2`.
    case unsupportedVersion

    func content(tenant: Int) -> Data {
        let name = "tenant\(tenant).example"
        let text = switch self {
        case .badJSON: #"{"formatVersion": 1, "tenant": "\#(name)", "fileEncryptionRequired": tr"#
        case .wrongType: #"{"formatVersion": 1, "tenant": "\#(name)", "fileEncryptionRequired": "yes"}"#
        case .unknownKey: #"{"formatVersion": 1, "tenant": "\#(name)", "fileEncryptionRequierd": true}"#
        case .unsupportedVersion: #"{"formatVersion": 2, "tenant": "\#(name)"}"#
        }
        return Data(text.utf8)
    }
}

extension World {
    /// Runs a fault episode now and then (from thread workers only, outside any step): a policy document
    /// changed (about 1 step in 170), a wipe (about 1 in 330). `true` when one ran.
    func episodeIfDue(_ random: inout SplitMix64) -> Bool {
        let roll = random.next() % 1000
        if options.faults.contains(.brokenPolicies) && roll < 6 {
            return gate.episode { changePolicy(&random) }
        }
        if options.faults.contains(.wipes) && (6..<9).contains(roll) {
            return gate.episode { wipe(&random) }
        }
        return false
    }

    // MARK: Policy documents

    /// Breaks, deletes, restores or fixes one tenant's document, reloads the source, and tells the model. At
    /// most two tenants are away from their good document at a time (the others keep the matrix busy); a
    /// tenant away goes on its way half the time (deleted, then broken from its first read, say).
    func changePolicy(_ random: inout SplitMix64) {
        operations.add(1, ordering: .relaxed)
        let current = documents.withLock { $0 }
        let away = current.filter { $0.value != .good }.keys.sorted()
        let tenant = !away.isEmpty && (away.count >= 2 || Int.random(in: 0..<2, using: &random) == 0)
            ? away[Int.random(in: 0..<away.count, using: &random)] : Int.random(in: 0..<options.tenants, using: &random)
        let kind = BrokenDocument.allCases[Int.random(in: 0..<BrokenDocument.allCases.count, using: &random)]
        // The self-check of broken documents needs documents broken from their first read: deleted ones break.
        let restore = Int.random(in: 0..<2, using: &random) == 0 && !(options.fault == .ignoreBrokenPolicy && current[tenant] == .deleted)
        let next: PolicyDocumentFile = switch current[tenant] ?? .good {
        case .good: restore ? .deleted : .brokenEdit(kind)
        case .brokenEdit: restore ? .good : .deleted
        case .deleted: restore ? .good : .brokenFromStart(kind)
        case .brokenFromStart: restore ? .good : .deleted
        }
        let path = Self.documentPath(policyDirectory, tenant)
        do {
            switch next {
            case .good:
                try Self.document(tenant: tenant, level: model.levels[tenant]!, encrypting: model.encryptingTenants.contains(tenant))
                    .write(to: URL(fileURLWithPath: path), options: .atomic)
            case let .brokenEdit(kind), let .brokenFromStart(kind):
                try kind.content(tenant: tenant).write(to: URL(fileURLWithPath: path), options: .atomic)
            case .deleted:
                try FileManager.default.removeItem(atPath: path)
            }
        } catch {
            return tally(.policyChange, nil, violation: "the program could not change \(path): \(error)")
        }
        policySource.reload()
        documents.withLock { $0[tenant] = next }
        let state: TenantState = switch next {
        case .good, .brokenEdit: .managed
        case .deleted: .withdrawn
        case .brokenFromStart(.badJSON): .unparseable
        case .brokenFromStart: .broken
        }
        blocks.setTenant(tenant, state)
        policyChanges.add(1, ordering: .relaxed)
        tally(.policyChange, state == .managed ? .allowed : .refused, violation: nil)
    }

    // MARK: Wipes

    /// Wipes one account (`PolicyManager.wipeData(forAccount:)`), or a whole tenant (`wipeData(forTenant:)`),
    /// while handles on their files are open, then checks what the contract promises: no file of theirs left
    /// that the report does not mention, and no plaintext of theirs from any handle or envelope, also once the
    /// accounts are unblocked (as enrolling them again does).
    func wipe(_ random: inout SplitMix64) {
        operations.add(1, ordering: .relaxed)
        wipes.add(1, ordering: .relaxed)
        let tenantWipe = Int.random(in: 0..<3, using: &random) == 0
        let tenant = Int.random(in: 0..<options.tenants, using: &random)
        var victims: [Identity]
        if tenantWipe {
            victims = model.tenants.filter { $0.value == tenant }.map(\.key)
            // An owner the manager does not know: the tenant wipe must find its files under the root.
            let stranger = strangers[tenant]
            let (files, path) = (files, fresh("stranger"))
            let plaintext = secret("file of \(show(stranger))", &random)
            let blocks = blocks.snapshot([stranger])
            do {
                try IdentityContext.withThreadIdentity(stranger) { try files.writeFile(atPath: path, contents: plaintext) }
                add(Item(kind: .file, plaintext: plaintext, path: path, owner: stranger, envelope: Data(),
                         isolated: isolation(after: false, owner: stranger, blocks)))
            } catch {
                // Refused (its tenant's document broken, say): the walk has other files of strangers or none.
            }
        } else {
            let handled = handles.withLock { $0 }.compactMap { $0.shredded ? nil : $0.owner }.filter { model.tenants[$0] != nil }
            let candidates = handled.isEmpty ? Array(model.tenants.keys) : handled
            victims = [candidates[Int.random(in: 0..<candidates.count, using: &random)]]
        }
        let victimSet = Set(victims)
        let owned = items.withLock { $0 }.filter { item in item.state.withLock { !$0.retired && $0.owner.map(victimSet.contains) ?? false } }
        let ownedFiles = owned.filter { $0.kind == .file || $0.kind == .streamFile }
        // A handle that writes, opened by the owner, beside the program's reading handles.
        var writers: [(ProtectedFile, Identity, String)] = []
        // A refused open (the owner blocked, its document broken) leaves the wipe without a writing handle: the
        // reading handles and envelopes are still checked.
        if let item = ownedFiles.first, let owner = item.state.withLock({ $0.owner }) {
            let files = files
            if let file = try? IdentityContext.withThreadIdentity(owner, operation: { try files.openProtectedFile(atPath: item.path, options: [.read, .write]) }) {
                writers.append((file, owner, item.path))
            }
        }
        // A file of a victim moved where no walk reaches it.
        var unreachable: [(name: String, owner: Identity)] = []
        if let deep, let item = ownedFiles.last, let owner = item.state.withLock({ $0.owner }) {
            let name = "moved-\(counter.add(1, ordering: .relaxed).newValue)"
            if deep.moveIn(item.path, as: name) {
                item.state.withLock { $0.retired = true }
                unreachable.append((name, owner))
            }
        }
        let reports = runWipe(tenantWipe ? .tenant(TenantID("tenant\(tenant).example")) : .account(victims[0]))
        let whole = tenantWipe ? "the wipe of tenant\(tenant).example" : "the wipe of \(show(victims[0]))"
        // What remains, reported or not.
        for item in ownedFiles where FileManager.default.fileExists(atPath: item.path) {
            guard let owner = item.state.withLock({ $0.owner }) else { continue }
            checkReported(reports, owner: owner, path: item.path, what: "\(whole) left \(item.path) of \(show(owner))")
            // Reported or not, it must not stay in the model's way.
            try? FileManager.default.removeItem(atPath: item.path)
        }
        for (name, owner) in unreachable where deep?.contains(name) ?? false {
            checkReported(reports, owner: owner, path: (deep?.path ?? "") + "/" + name,
                          what: "\(whole) left \(show(owner))'s file in a directory it could not walk")
        }
        // A tenant wipe whose search could not look everywhere reports that it may have missed owners: an owner
        // it has no report for (a stranger whose files all lie where it could not look) keeps its keys, and
        // that is what the report says. Every other victim's data must be gone.
        let unreached = reports.search.isEmpty ? Set<Identity>() : victimSet.subtracting(reports.accounts.keys)
        let shreddedOwners = victimSet.subtracting(unreached)
        // Re-enrolment: the accounts are unblocked; nothing of theirs may decrypt any more.
        for victim in victims { manager.unblockAccount(victim, reason: .wiped) }
        for item in owned {
            item.state.withLock { $0.retired = true }
        }
        shredded.withLock { list in
            list.append(contentsOf: owned.filter { $0.kind == .envelope && $0.state.withLock { $0.owner.map(shreddedOwners.contains) ?? false } })
            if list.count > 64 { list.removeFirst(list.count - 64) }
        }
        let marked = handles.withLock { handles -> [HeldHandle] in
            for index in handles.indices where handles[index].owner.map(shreddedOwners.contains) ?? false {
                handles[index].shredded = true
            }
            return handles.filter(\.shredded)
        }
        for handle in marked where handle.owner.map(shreddedOwners.contains) ?? false {
            let result = attempt { try IdentityContext.withThreadIdentity(handle.opener) { Data(try handle.file.read(at: 0, upToCount: 1 << 16)) } }
            checkShredded(handle, result, what: "a read through \(show(handle.opener))'s handle on \(show(handle.owner))'s file after \(whole)")
        }
        for (file, owner, path) in writers {
            // A handle of an owner the wipe did not reach (its report says so) is only closed.
            guard shreddedOwners.contains(owner) else {
                try? file.close()
                continue
            }
            let plaintext = FileManager.default.contents(atPath: path)
            let read = attempt { try IdentityContext.withThreadIdentity(owner) { Data(try file.read(at: 0, upToCount: 1 << 16)) } }
            if case let .success(bytes?) = read, !bytes.isEmpty {
                destroyedKeyPlaintext.add(1, ordering: .relaxed)
                tally(.wipedData, .allowed, violation: "\(show(owner))'s writing handle read \(bytes.count) bytes after \(whole) destroyed its keys")
            } else {
                tally(.wipedData, .refused, violation: nil)
            }
            let write = attempt { try IdentityContext.withThreadIdentity(owner) { try file.write(Data("after the wipe".utf8), at: 0) }; return nil }
            if write.isSuccess {
                tally(.wipedData, .allowed, violation: "\(show(owner))'s writing handle wrote after \(whole) destroyed its keys"
                    + (plaintext == nil ? "" : " (the file was not even removed)"))
            }
            // The handle's file is gone; closing it may fail, which says nothing about the wipe.
            try? file.close()
        }
        checkShreddedEnvelopes(owned.filter { $0.kind == .envelope && $0.state.withLock { $0.owner.map(shreddedOwners.contains) ?? false } }, after: whole)
    }

    enum WipeTarget {
        case account(Identity)
        case tenant(TenantID)
    }

    /// What one wipe reported: each account's report, and what a tenant wipe's search could not look into.
    struct WipeReports {
        var accounts: [Identity: WipeReport] = [:]
        var search: [WipeLeftover] = []
    }

    /// Runs the policy manager's wipe from this thread (it awaits; a task of its own does), and gives its
    /// reports.
    func runWipe(_ target: WipeTarget) -> WipeReports {
        let answer = Answer<([WipeReport], [WipeLeftover])>()
        let manager = manager
        Task {
            switch target {
            case let .account(account): answer.give(.success(([await manager.wipeData(forAccount: account)], [])))
            case let .tenant(tenant):
                let report = await manager.wipeData(forTenant: tenant)
                answer.give(.success((report.accounts, report.leftovers)))
            }
        }
        guard case let .success((reports, search)) = answer.wait() else { return WipeReports() }
        var result = WipeReports(search: options.fault == .hideWipeLeftovers ? [] : search)
        for var report in reports {
            if options.fault == .hideWipeLeftovers {
                report.error = nil
                report.leftovers = []
            }
            result.accounts[report.account] = report
        }
        return result
    }

    /// A file a wipe left: a violation unless the wipe's reports list it, or a directory above it that the
    /// wipe could not read (its account's report, or a tenant wipe's search). A report that only carries an
    /// error, without the place, does not report the file.
    func checkReported(_ reports: WipeReports, owner: Identity, path: String, what: String) {
        let listed = (reports.accounts[owner]?.leftovers ?? []) + reports.search
        if listed.contains(where: { path == $0.path || path.hasPrefix($0.path.hasSuffix("/") ? $0.path : $0.path + "/") }) {
            return tally(.wipe, .refused, violation: nil)
        }
        unreportedLeftovers.add(1, ordering: .relaxed)
        tally(.wipe, .allowed, violation: "\(what), and its report does not say so")
    }

    /// A read through a handle whose owner's keys a wipe destroyed: a typed error, and no plaintext.
    func checkShredded(_ handle: HeldHandle, _ result: Result<Data?, any Error>, what: String) {
        switch result {
        case let .success(bytes):
            if let bytes, !bytes.isEmpty, bytes.range(of: handle.plaintext.prefix(24)) != nil { destroyedKeyPlaintext.add(1, ordering: .relaxed) }
            tally(.wipedData, .allowed, violation: "\(what) gave \(bytes?.count ?? 0) bytes; the keys were destroyed")
        case .failure(is ProtectionError):
            tally(.wipedData, .refused, violation: nil)
        case let .failure(error):
            tally(.wipedData, .refused, violation: "\(what) failed with an untyped error: \(error)")
        }
    }

    /// Envelopes of wiped accounts, read by their owners: nothing decrypts.
    func checkShreddedEnvelopes(_ envelopes: [Item], after whole: String) {
        for item in envelopes {
            let (owner, envelope, plaintext) = item.state.withLock { ($0.owner, $0.envelope, $0.plaintext) }
            let data = data
            let result = attempt { try IdentityContext.withThreadIdentity(owner) { try data.unprotect(envelope) } }
            switch result {
            case let .success(bytes):
                // An envelope in the clear (written while its owner was not managed) has no key to destroy.
                guard (try? data.protectionInfo(envelope)?.isEncrypted) == true else { continue }
                if bytes == plaintext { destroyedKeyPlaintext.add(1, ordering: .relaxed) }
                tally(.wipedData, .allowed, violation: "an envelope of \(show(owner)) decrypted after \(whole), which must destroy its keys")
            case .failure:
                tally(.wipedData, .refused, violation: nil)
            }
        }
    }

    /// Reads an envelope of a wiped account, as anyone, in the middle of the run: nothing decrypts.
    func readShredded(_ random: inout SplitMix64) {
        let picked = shredded.withLock { list in list.isEmpty ? nil : list[Int.random(in: 0..<list.count, using: &random)] }
        guard let item = picked else { return }
        checkShreddedEnvelopes([item], after: "a wipe")
    }
}
