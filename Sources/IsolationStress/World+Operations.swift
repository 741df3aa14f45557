import Dispatch
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting

extension World {
    func keepGoing(_ done: Int, budget: Int?, deadline: UInt64) -> Bool {
        if let budget { return done < budget }
        return DispatchTime.now().uptimeNanoseconds < deadline
    }

    /// A worker on a raw thread: every operation synchronous (or, with the key-store faults, through the
    /// `.async` API awaited from here); the fault episodes run from these workers.
    func work(random: inout SplitMix64, budget: Int?, deadline: UInt64) {
        var done = 0
        while keepGoing(done, budget: budget, deadline: deadline) {
            if !episodeIfDue(&random) {
                gate.enter()
                step(&random)
                gate.leave()
            }
            done += 1
        }
    }

    /// A worker in a task: reads of envelopes happen in child tasks; streams are protected and read here.
    func workInTasks(random: inout SplitMix64, budget: Int?, deadline: UInt64) async {
        var done = 0
        while keepGoing(done, budget: budget, deadline: deadline) {
            await gate.enter()
            defer { gate.leave() }
            switch Int.random(in: 0..<8, using: &random) {
            case 0, 1:
                operations.add(1, ordering: .relaxed)
                if let item = pick(&random, [.envelope]) {
                    let reader = anyone(&random)
                    await IdentityContext.withThreadIdentity(reader) {
                        await Task { self.read(item, by: reader, api: .unprotectInTask) }.value
                    }
                }
            case 2:
                operations.add(1, ordering: .relaxed)
                await createStream(by: anyone(&random), &random)
            case 3:
                operations.add(1, ordering: .relaxed)
                if let item = pick(&random, [.stream]) { await readStream(item, by: anyone(&random), &random) }
            default:
                step(&random)
            }
            done += 1
        }
    }

    func step(_ random: inout SplitMix64) {
        removeEvicted()
        operations.add(1, ordering: .relaxed)
        let roll = Int.random(in: 0..<200, using: &random)
        switch roll {
        case 0..<20: createEnvelope(by: anyone(&random), &random)
        case 20..<40: createFile(by: anyone(&random), &random)
        case 40..<106:
            let reader = anyone(&random)
            let apis: [IsolationStress.API] = [.unprotect, .readFile, .readFileThroughQueue, .decryptFileToCopy, .openProtectedFile]
            let api = apis[Int.random(in: 0..<apis.count, using: &random)]
            guard let item = pick(&random, api == .unprotect ? [.envelope] : [.file]) else { return }
            if api == .readFileThroughQueue {
                let group = DispatchGroup()
                IdentityContext.withThreadIdentity(reader) {
                    queue.async(group: group) { self.read(item, by: reader, api: api) }
                }
                group.wait()
            } else {
                IdentityContext.withThreadIdentity(reader) { read(item, by: reader, api: api) }
            }
        case 106..<122:
            guard let item = pick(&random, [.file]) else { return }
            modify(item, by: anyone(&random), &random)
        case 122..<132:
            let source = anyone(&random), target = anyone(&random)
            let blocks = blocks.snapshot([source, target])
            let answer = manager.isDataTransferAllowed(from: source, to: target)
            let expected = model.isTransferAllowed(from: source, to: target, blocks)
            let what = "isDataTransferAllowed(from: \(show(source)), to: \(show(target))) = \(answer), expected \(expected.map { "\($0)" } ?? "either")"
            if !self.blocks.isUnchanged(since: blocks) { return tally(.isDataTransferAllowed, .undecided, violation: nil) }
            let wrong = expected.map { $0 != answer } ?? false
            let broken = wrong && answer && model.standing(source, blocks) == .unknown
            if broken { brokenPolicyAllowances.add(1, ordering: .relaxed) }
            tally(.isDataTransferAllowed, answer ? .allowed : .refused,
                  violation: wrong ? what + (broken ? " (the source's policy document is broken)" : "") : nil)
        case 132..<144:
            guard let item = pick(&random, [.file]), let target = anyone(&random) else { return }
            reown(item, to: target)
        case 144..<152:
            guard let item = pick(&random, [.file]) else { return }
            decryptInPlace(item, by: anyone(&random))
        case 152..<162:
            guard let source = pick(&random, [.file]), let target = pick(&random, [.file, .streamFile]), source !== target else { return }
            copyOver(source, onto: target, by: anyone(&random))
        case 162..<172:
            guard let item = pick(&random, [.file]) else { return }
            protectToStreamFile(item, by: anyone(&random), &random)
        case 172..<182:
            guard let item = pick(&random, [.streamFile]) else { return }
            let over = Int.random(in: 0..<2, using: &random) == 0 ? pick(&random, [.file]) : nil
            unprotectStreamFile(item, over: over, by: anyone(&random))
        case 182..<188:
            // Half the time data with no owner or `""`'s, which the unloaded manager must still serve.
            let unowned = Int.random(in: 0..<2, using: &random) == 0
            guard let item = unowned ? pick(&random, [.envelope, .file], ownedBy: { $0?.isUnmanaged ?? true })
                : pick(&random, [.envelope, .file]) else { return }
            readUnloaded(item, by: anyone(&random))
        case 188..<191:
            let writer = Int.random(in: 0..<2, using: &random) == 0 ? outsiders[Int.random(in: 0..<outsiders.count, using: &random)] : anyone(&random)
            createUnloaded(by: writer, &random)
        case 191..<198:
            if Int.random(in: 0..<3, using: &random) == 0, let item = pickForHandle(&random) {
                // Mostly the owner itself, else anyone: blocks of either then close the handle's access.
                let opener = Int.random(in: 0..<2, using: &random) == 0 ? item.state.withLock { $0.owner } : anyone(&random)
                holdHandle(item, by: opener)
            } else if !shredded.withLock(\.isEmpty) && Int.random(in: 0..<4, using: &random) == 0 {
                readShredded(&random)
            } else {
                useHeldHandle(&random)
            }
        default:
            blocks.toggle(blockable[Int.random(in: 0..<blockable.count, using: &random)], in: manager)
        }
    }

    // MARK: Creating

    func createEnvelope(by writer: Identity?, _ random: inout SplitMix64) {
        let plaintext = secret("envelope of \(show(writer))", &random)
        let blocks = blocks.snapshot([writer])
        let (data, owner) = (data, writer ?? .unmanaged)
        let result = call(writer) { try data.protect(plaintext) } async: { try await data.async.protect(plaintext) }
        let what = "protect as \(show(writer))"
        guard case let .allowed(envelope?) = judge(.protect, what, refusals: model.create(for: owner, blocks), blocks: blocks, owner: owner, result.map { $0 })
        else { return }
        // No owner readable is a wrong owner, reported below.
        let recorded = try? data.protectionInfo(envelope)?.owner
        if recorded != owner { return tally(.protect, nil, violation: "\(what) gave owner \(show(recorded))") }
        add(Item(kind: .envelope, plaintext: plaintext, path: "", owner: owner, envelope: envelope, isolated: isolation(after: false, owner: owner, blocks)))
    }

    func createFile(by writer: Identity?, _ random: inout SplitMix64) {
        let path = fresh("file")
        let plaintext = secret("file of \(show(writer))", &random)
        let blocks = blocks.snapshot([writer])
        let files = files
        let result = call(writer) { try files.writeFile(atPath: path, contents: plaintext) } async: {
            try await files.async.writeFile(atPath: path, contents: plaintext)
        }
        switch judge(.writeFile, "writeFile as \(show(writer))", refusals: model.create(for: writer, blocks), blocks: blocks, owner: writer, result.withoutData) {
        case .allowed:
            checkAtRest(path, owner: writer, plaintext: plaintext, api: .writeFile)
            add(Item(kind: .file, plaintext: plaintext, path: path, owner: writer, envelope: Data(), isolated: isolation(after: false, owner: writer, blocks)))
        case .refused, .violated, .interrupted:
            if FileManager.default.fileExists(atPath: path) && result.isFailure {
                tally(.writeFile, nil, violation: "a refused writeFile as \(show(writer)) left \(path) behind")
            }
        case .undecided:
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// Protects a new stream as `writer`, in pieces of random sizes.
    func createStream(by writer: Identity?, _ random: inout SplitMix64) async {
        let plaintext = secret("stream of \(show(writer))", &random) + Data(repeating: 0x2E, count: Int(random.next() % 200))
        let pieces = Self.split(Array(plaintext), &random)
        let chunkSize = 1 + Int(random.next() % 64)
        let blocks = blocks.snapshot([writer])
        let result: Result<Data?, any Error>
        do {
            let sealed = try await IdentityContext.withThreadIdentity(writer) {
                try await data.protect(Self.stream(pieces), chunkSize: chunkSize).collect()
            }
            result = .success(Data(sealed))
        } catch {
            result = .failure(error)
        }
        let refusals = model.create(for: writer ?? .unmanaged, blocks)
        guard case let .allowed(sealed?) = judge(.protectStream, "protect of a stream as \(show(writer))", refusals: refusals, blocks: blocks,
                                                 owner: writer ?? .unmanaged, result) else { return }
        add(Item(kind: .stream, plaintext: plaintext, path: "", owner: writer ?? .unmanaged, envelope: sealed,
                 isolated: isolation(after: false, owner: writer ?? .unmanaged, blocks)))
    }

    // MARK: Reading

    /// Unprotects a stream as `reader`, split at random (empty pieces first and in between), against the model.
    func readStream(_ item: Item, by reader: Identity?, _ random: inout SplitMix64) async {
        let (owner, envelope, plaintext, isolated, retired) = item.state.withLock { ($0.owner, $0.envelope, $0.plaintext, $0.isolated, $0.retired) }
        // A stream of a wiped account: its key is gone, on purpose.
        guard !retired else { return }
        let pieces = [[]] + Self.split(Array(envelope), &random)
        let blocks = blocks.snapshot([owner, reader])
        let result: Result<Data?, any Error>
        do {
            result = .success(Data(try await IdentityContext.withThreadIdentity(reader) { try await data.unprotect(Self.stream(pieces)).collect() }))
        } catch {
            result = .failure(error)
        }
        let what = "unprotectStream of \(show(owner))'s data by \(show(reader))"
        let refusals = model.read(owner: owner, by: reader, isolated: isolated, blocks)
        if case let .allowed(bytes) = judge(.unprotectStream, what, refusals: refusals, blocks: blocks, secret: plaintext.prefix(24), owner: owner,
                                            isolated: isolated, result), bytes != plaintext {
            tally(.unprotectStream, nil, violation: "\(what) gave other bytes")
        }
    }

    /// `bytes` cut into pieces of random sizes, empty ones included.
    static func split(_ bytes: [UInt8], _ random: inout SplitMix64) -> [[UInt8]] {
        var pieces: [[UInt8]] = []
        var offset = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, Int(random.next() % 48))
            pieces.append(Array(bytes[offset..<offset + count]))
            offset += count
        }
        return pieces
    }

    static func stream(_ pieces: [[UInt8]]) -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
    }

    /// One read of `item` by the current thread identity `reader`, checked against the model.
    func read(_ item: Item, by reader: Identity?, api: IsolationStress.API) {
        item.state.withLock { state in
            guard !state.retired else { return }
            let plaintext = state.plaintext
            let blocks = blocks.snapshot([state.owner, reader])
            let (envelope, path, data, files) = (state.envelope, item.path, data, files)
            let copy = fresh("copy")
            // The copy exists only when the read was allowed; removed either way.
            defer { try? FileManager.default.removeItem(atPath: copy) }
            let result: Result<Data?, any Error> = call(reader) { () throws -> Data? in
                switch api {
                case .unprotect, .unprotectInTask:
                    return try data.unprotect(envelope)
                case .readFile, .readFileThroughQueue:
                    return try files.readFile(atPath: path)
                case .decryptFileToCopy:
                    try files.decryptFile(atPath: path, toPath: copy)
                    return FileManager.default.contents(atPath: copy)
                default:
                    let file = try files.openProtectedFile(atPath: path, options: [.read])
                    // A read-only handle has nothing to write back: closing it cannot lose data.
                    defer { try? file.close() }
                    return Data(try file.readToEnd())
                }
            } async: { () async throws -> Data? in
                switch api {
                case .unprotect, .unprotectInTask:
                    return try await data.async.unprotect(envelope)
                case .readFile, .readFileThroughQueue:
                    return try await files.async.readFile(atPath: path)
                case .decryptFileToCopy:
                    try await files.async.decryptFile(atPath: path, toPath: copy)
                    return FileManager.default.contents(atPath: copy)
                default:
                    let file = try await files.async.openProtectedFile(atPath: path, options: [.read])
                    defer { try? file.close() }
                    return Data(try file.readToEnd())
                }
            }
            let what = "\(api.rawValue) of \(show(state.owner))'s data by \(show(reader))"
            let refusals = model.read(owner: state.owner, by: reader, isolated: state.isolated, blocks)
            if case let .allowed(bytes) = judge(api, what, refusals: refusals, blocks: blocks, secret: plaintext, owner: state.owner,
                                                isolated: state.isolated, result), bytes != plaintext {
                tally(api, nil, violation: "\(what) gave other bytes")
            }
        }
    }

    /// Reads `item` through the managers whose policy source never loaded: `ProtectionError.policyUnavailable(reason:)` (115) for any owned data.
    func readUnloaded(_ item: Item, by reader: Identity?) {
        item.state.withLock { state in
            guard !state.retired, item.kind == .envelope || unloadedSeesOwners else { return }
            let envelope = state.envelope
            let result = attempt {
                try IdentityContext.withThreadIdentity(reader) {
                    item.kind == .envelope ? try unloadedData.unprotect(envelope) : try unloadedFiles.readFile(atPath: item.path)
                }
            }
            let what = "a read of \(show(state.owner))'s data by \(show(reader)) before the policy loaded"
            if case let .allowed(bytes) = judge(.readUnloaded, what, refusals: model.unloaded(owner: state.owner), blocks: nil, secret: state.plaintext, result),
               bytes != state.plaintext {
                tally(.readUnloaded, nil, violation: "\(what) gave other bytes")
            }
        }
    }

    /// Protects an envelope for `writer` through the manager whose policy source never loaded.
    func createUnloaded(by writer: Identity?, _ random: inout SplitMix64) {
        let plaintext = secret("unloaded envelope of \(show(writer))", &random)
        let result = attempt { try IdentityContext.withThreadIdentity(writer) { try unloadedData.protect(plaintext) } }
        _ = judge(.createUnloaded, "protect as \(show(writer)) before the policy loaded",
                  refusals: model.unloaded(owner: writer ?? .unmanaged), blocks: nil, result)
    }

    /// A file item, preferably one owned by an account the program blocks and unblocks.
    func pickForHandle(_ random: inout SplitMix64) -> Item? {
        let blockable = Set(blockable)
        return pick(&random, [.file], ownedBy: { $0.map(blockable.contains) ?? false }) ?? pick(&random, [.file])
    }

    /// Opens `item` for reading as `opener` and keeps the handle (at most 16; the oldest is closed).
    func holdHandle(_ item: Item, by opener: Identity?) {
        item.state.withLock { state in
            guard !state.retired else { return }
            let file: ProtectedFile
            do {
                file = try IdentityContext.withThreadIdentity(opener) { try files.openProtectedFile(atPath: item.path, options: [.read]) }
            } catch {
                return   // the open itself is judged by the openProtectedFile reads
            }
            let handle = HeldHandle(file: file, opener: opener, owner: state.owner, plaintext: state.plaintext, isolated: state.isolated)
            let evicted = handles.withLock { handles -> HeldHandle? in
                handles.append(handle)
                return handles.count > 16 ? handles.removeFirst() : nil
            }
            try? evicted?.file.close()
        }
    }

    /// Reads through a kept handle, from a random identity: judged by the access of its opener to its owner's
    /// data under the blocks of now.
    func useHeldHandle(_ random: inout SplitMix64) {
        let caller = anyone(&random)
        let picked = handles.withLock { handles in handles.isEmpty ? nil : handles[Int.random(in: 0..<handles.count, using: &random)] }
        guard let handle = picked else { return }
        let blocks = blocks.snapshot([handle.owner, handle.opener])
        let result = attempt { try IdentityContext.withThreadIdentity(caller) { Data(try handle.file.read(at: 0, upToCount: 1 << 16)) } }
        let what = "a read through \(show(handle.opener))'s handle on \(show(handle.owner))'s file, from \(show(caller))"
        if handle.shredded { return checkShredded(handle, result, what: what) }
        let refusals = model.read(owner: handle.owner, by: handle.opener, isolated: handle.isolated, blocks)
        if case let .failure(error as ProtectionError) = result {
            // Closed by an eviction meanwhile; or, past the gate, chunks rewritten or cut under this reading
            // handle by a writer on another handle (a typed error, never wrong bytes: Sources/IdentityProtection/IdentityProtection.docc/DataAndFileProtection.md).
            if error.code == 111 { return }
            if [100, 102].contains(error.code) && refusals.isAllowed && self.blocks.isUnchanged(since: blocks) {
                return tally(.heldHandle, .allowed, violation: nil)
            }
        }
        _ = judge(.heldHandle, what, refusals: refusals, blocks: blocks, secret: handle.plaintext.prefix(24), owner: handle.owner,
                  isolated: handle.isolated, result)
    }

    // MARK: Modifying

    /// `caller` changes the file `item` one of three ways, checked against the model; a refused change must
    /// leave the file's bytes as they were, and an interrupted one (113) its bytes and its owner.
    func modify(_ item: Item, by caller: Identity?, _ random: inout SplitMix64) {
        let replacement = secret("change by \(show(caller))", &random)
        let way = Int.random(in: 0..<3, using: &random)
        let named: Identity? = [nil, caller, anyone(&random)][Int.random(in: 0..<3, using: &random)]
        item.state.withLock { state in
            guard !state.retired else { return }
            let before = FileManager.default.contents(atPath: item.path)
            let intact = storeFaults ? snapshot(item.path) : nil
            // The owner of the result: the caller for writeFile, the named owner (else the caller) for a
            // truncating open, the recorded owner for a writing handle that does not truncate.
            let newOwner: Identity? = switch way {
            case 0: caller
            case 1: named ?? caller
            default: state.owner
            }
            let blocks = blocks.snapshot([state.owner, caller, newOwner])
            // A truncating open also leaves the caller a handle on the new owner's file: it must be allowed to
            // modify that owner's data.
            let refusals = way == 2
                ? model.read(owner: state.owner, by: caller, isolated: state.isolated, blocks)
                : model.modify(owner: state.owner, by: caller, newOwner: newOwner, isolated: state.isolated, blocks)
                    .union(model.create(for: newOwner, blocks))
                    .union(way == 1 ? model.read(owner: newOwner, by: caller, isolated: model.isolatedAtCreation(newOwner, blocks), blocks) : [])
            let what = ["writeFile over", "openProtectedFile(.truncate, owner: \(show(named))) of", "openProtectedFile(.write) of"][way]
                + " \(show(state.owner))'s file by \(show(caller))"
            if way == 1 && options.fault == .truncateBeforeKey {
                // The defect this self-check stands for: the file emptied before the key is at hand.
                truncate(item.path, 0)
            }
            let (path, files) = (item.path, files)
            let result = call(caller) {
                switch way {
                case 0:
                    try files.writeFile(atPath: path, contents: replacement)
                case 1:
                    let file = try files.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: named)
                    try file.write(replacement)
                    try file.close()
                default:
                    let file = try files.openProtectedFile(atPath: path, options: [.read, .write])
                    try file.write(replacement, at: 0)
                    try file.truncate(to: UInt64(replacement.count))
                    try file.close()
                }
            } async: {
                switch way {
                case 0:
                    try await files.async.writeFile(atPath: path, contents: replacement)
                case 1:
                    let file = try await files.async.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: named)
                    try file.write(replacement)
                    try file.close()
                default:
                    let file = try await files.async.openProtectedFile(atPath: path, options: [.read, .write])
                    try file.write(replacement, at: 0)
                    try file.truncate(to: UInt64(replacement.count))
                    try file.close()
                }
            }
            switch judge(.modifyFile, what, refusals: refusals, blocks: blocks, owner: state.owner, isolated: state.isolated,
                         also: (newOwner, nil), result.withoutData) {
            case .allowed:
                state.isolated = isolation(after: state.owner == newOwner ? state.isolated : false, owner: newOwner, blocks)
                state.owner = newOwner
                state.plaintext = replacement
                verify(item, state: state, api: .modifyFile, what: what)
                checkAtRest(item.path, owner: newOwner, plaintext: replacement, api: .modifyFile)
            case .refused:
                checkUnchanged(item.path, before: before, .modifyFile, what)
            case .interrupted:
                if let intact { checkIntact(item.path, before: intact, .modifyFile, what) }
                state.retired = intact.map { $0 != snapshot(item.path) } ?? true
            case .violated:
                if result.isSuccess { foreignModifications.add(1, ordering: .relaxed) } else { checkUnchanged(item.path, before: before, .modifyFile, what) }
                state.retired = true
            case .undecided:
                state.retired = true
            }
        }
    }

    /// Cuts the file at `path` to `length` bytes (the self-check's stand-in for a runtime that does).
    func truncate(_ path: String, _ length: Int) {
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.truncateFile(atOffset: UInt64(length))
            handle.closeFile()
        }
    }

    /// The isolation data records when it becomes `owner`'s now (`old`: what it recorded before, for data that
    /// keeps its owner): isolated when its owner is managed; never for an owner no document names; unknown
    /// (either is accepted) when the owner is a withdrawn or broken tenant's account and it was isolated before.
    func isolation(after old: Bool?, owner: Identity?, _ blocks: BlockBoard.Snapshot) -> Bool? {
        guard let owner, model.tenants[owner] != nil else { return false }
        switch model.standing(owner, blocks) {
        case .managed: return true
        case .unknown: return nil
        case .unmanaged: return old == false ? false : nil
        }
    }

    /// Checks that the file of `item` is recorded as `state.owner`'s and holds `state.plaintext` (read as its owner).
    func verify(_ item: Item, state: Item.State, api: IsolationStress.API, what: String) {
        // An owner that cannot be read is not the expected one, and an unreadable file is not checked here
        // (the reads of the program judge it): both are answers, not errors to pass on.
        let owner = try? files.protectionInfo(atPath: item.path)?.owner
        let reread = try? IdentityContext.withThreadIdentity(state.owner) { try files.readFile(atPath: item.path) }
        if owner != state.owner || (reread != nil && reread != state.plaintext) {
            tally(api, nil, violation: "\(what): the file is \(show(owner))'s, holding other bytes")
        }
    }

    /// Gives the file `item` to `target`, as its owner, checked against the model.
    func reown(_ item: Item, to target: Identity) {
        item.state.withLock { state in
            guard !state.retired else { return }
            let before = FileManager.default.contents(atPath: item.path)
            let intact = storeFaults ? snapshot(item.path) : nil
            let blocks = blocks.snapshot([state.owner, target])
            let refusals = model.modify(owner: state.owner, by: state.owner, newOwner: target, isolated: state.isolated, blocks)
                .union(model.create(for: target, blocks))
            let what = "re-owning \(show(state.owner))'s file to \(show(target))"
            let (path, files) = (item.path, files)
            let result = call(state.owner) { try files.protect(atPath: path, owner: target) } async: {
                try await files.async.protect(atPath: path, owner: target)
            }
            switch judge(.reownFile, what, refusals: refusals, blocks: blocks, owner: state.owner, isolated: state.isolated,
                         also: (target, nil), result.withoutData) {
            case .allowed:
                state.isolated = isolation(after: state.owner == target ? state.isolated : false, owner: target, blocks)
                state.owner = target
                verify(item, state: state, api: .reownFile, what: what)
            case .refused:
                checkUnchanged(item.path, before: before, .reownFile, what)
            case .interrupted:
                if let intact { checkIntact(item.path, before: intact, .reownFile, what) }
                state.retired = intact.map { $0 != snapshot(item.path) } ?? true
            case .violated, .undecided:
                state.retired = true
            }
        }
    }

    /// `decryptFile(atPath:)` of `item` by `caller`: a modification of the owner's data (and a read).
    func decryptInPlace(_ item: Item, by caller: Identity?) {
        item.state.withLock { state in
            guard !state.retired else { return }
            let before = FileManager.default.contents(atPath: item.path)
            let intact = storeFaults ? snapshot(item.path) : nil
            let blocks = blocks.snapshot([state.owner, caller])
            let what = "decryptFile(atPath:) of \(show(state.owner))'s file by \(show(caller))"
            let (path, files) = (item.path, files)
            let result = call(caller) { try files.decryptFile(atPath: path) } async: { try await files.async.decryptFile(atPath: path) }
            let refusals = model.read(owner: state.owner, by: caller, isolated: state.isolated, blocks)
            switch judge(.decryptInPlace, what, refusals: refusals, blocks: blocks, owner: state.owner, isolated: state.isolated, result.withoutData) {
            case .allowed:
                verify(item, state: state, api: .decryptInPlace, what: what)
            case .refused:
                checkUnchanged(item.path, before: before, .decryptInPlace, what)
            case .interrupted:
                if let intact { checkIntact(item.path, before: intact, .decryptInPlace, what) }
                state.retired = intact.map { $0 != snapshot(item.path) } ?? true
            case .violated, .undecided:
                state.retired = true
            }
        }
    }

    /// `decryptFile(atPath: source, toPath: target)` by `caller`: a read of the source's owner, and the
    /// target file replaced by data of that owner (a modification of the target's owner, and a transfer).
    func copyOver(_ source: Item, onto target: Item, by caller: Identity?) {
        let what = { (source: Identity?, target: Identity?) in
            "decryptFile(atPath: \(self.show(source))'s file, toPath: \(self.show(target))'s file) by \(self.show(caller))"
        }
        let (files, from, to) = (files, source.path, target.path)
        writeOver(target, from: source, api: .copyOver, by: caller, describe: what) {
            try files.decryptFile(atPath: from, toPath: to)
        } async: {
            try await files.async.decryptFile(atPath: from, toPath: to)
        }
    }

    /// `protect(atPath:toPath:owner:)` of `item` into a new stream file, by `caller`, for an owner of
    /// its choice (none named, itself, anyone).
    func protectToStreamFile(_ item: Item, by caller: Identity?, _ random: inout SplitMix64) {
        let named: Identity? = [nil, caller, anyone(&random)][Int.random(in: 0..<3, using: &random)]
        let destination = fresh("stream")
        item.state.withLock { state in
            guard !state.retired else { return }
            let newOwner = named ?? caller ?? .unmanaged
            let blocks = blocks.snapshot([state.owner, caller, newOwner])
            let refusals = model.read(owner: state.owner, by: caller, isolated: state.isolated, blocks)
                .union(state.owner == newOwner ? [] : model.transfer(owner: state.owner, to: newOwner, isolated: state.isolated, blocks))
                .union(model.create(for: newOwner, blocks))
            let what = "protect(atPath: \(show(state.owner))'s file, owner: \(show(named))) by \(show(caller))"
            let (path, files) = (item.path, files)
            let result = call(caller) { try files.protect(atPath: path, toPath: destination, owner: named) } async: {
                try await files.async.protect(atPath: path, toPath: destination, owner: named)
            }
            switch judge(.protectFileToStream, what, refusals: refusals, blocks: blocks, owner: state.owner, isolated: state.isolated,
                         also: (newOwner, nil), result.withoutData) {
            case .allowed:
                checkAtRest(destination, owner: newOwner, plaintext: state.plaintext, api: .protectFileToStream)
                // No owner readable is not the expected owner.
                if (try? files.protectionInfo(atPath: destination)?.owner) != newOwner {
                    tally(.protectFileToStream, nil, violation: "\(what): the stream file is not recorded as \(show(newOwner))'s")
                }
                let isolated = isolation(after: state.owner == newOwner ? state.isolated : false, owner: newOwner, blocks)
                add(Item(kind: .streamFile, plaintext: state.plaintext, path: destination, owner: newOwner, envelope: Data(), isolated: isolated))
            case .refused, .violated, .interrupted:
                if FileManager.default.fileExists(atPath: destination) && result.isFailure {
                    tally(.protectFileToStream, nil, violation: "\(what) was refused but left \(destination) behind")
                }
            case .undecided:
                try? FileManager.default.removeItem(atPath: destination)
            }
        }
    }

    /// `unprotect(atPath:toPath:)` of the stream file `item` by `caller`, to a fresh path or over the file
    /// `over` (a modification of its owner's data, which becomes the stream's owner's).
    func unprotectStreamFile(_ item: Item, over target: Item?, by caller: Identity?) {
        let files = files
        guard let target else {
            return item.state.withLock { state in
                guard !state.retired else { return }
                let destination = fresh("opened")
                // Written only when allowed; removed either way.
                defer { try? FileManager.default.removeItem(atPath: destination) }
                let blocks = blocks.snapshot([state.owner, caller])
                let refusals = model.read(owner: state.owner, by: caller, isolated: state.isolated, blocks).union(model.create(for: state.owner, blocks))
                let what = "unprotect(atPath: \(show(state.owner))'s stream file) by \(show(caller))"
                let path = item.path
                let result: Result<Data?, any Error> = call(caller) { () throws -> Data? in
                    try files.unprotect(atPath: path, toPath: destination)
                    return FileManager.default.contents(atPath: destination)
                } async: { () async throws -> Data? in
                    try await files.async.unprotect(atPath: path, toPath: destination)
                    return FileManager.default.contents(atPath: destination)
                }
                if case let .allowed(bytes) = judge(.unprotectStreamFile, what, refusals: refusals, blocks: blocks, secret: state.plaintext,
                                                    owner: state.owner, isolated: state.isolated, result),
                   bytes != state.plaintext {
                    tally(.unprotectStreamFile, nil, violation: "\(what) gave other bytes")
                }
            }
        }
        let what = { (source: Identity?, target: Identity?) in
            "unprotect(atPath: \(self.show(source))'s stream file, toPath: \(self.show(target))'s file) by \(self.show(caller))"
        }
        let (from, to) = (item.path, target.path)
        writeOver(target, from: item, api: .unprotectStreamFile, by: caller, creates: true, describe: what) {
            try files.unprotect(atPath: from, toPath: to)
        } async: {
            try await files.async.unprotect(atPath: from, toPath: to)
        }
    }

    /// `write`, as `caller`, replaces the file `target` with the content of `source`, owned by `source`'s owner:
    /// a read of the source's owner's data, a modification of the target's owner's data and a transfer of it
    /// (and, when `creates`, data created for the source's owner), checked against the model; a refused call
    /// must leave the target's bytes as they were.
    func writeOver(
        _ target: Item, from source: Item, api: IsolationStress.API, by caller: Identity?, creates: Bool = false,
        describe: (_ source: Identity?, _ target: Identity?) -> String, _ write: () throws -> Void,
        async writeAsync: @escaping @Sendable () async throws -> Void
    ) {
        Item.withBoth(source, target) { sourceState, targetState in
            guard !sourceState.retired, !targetState.retired else { return }
            let before = FileManager.default.contents(atPath: target.path)
            let intact = storeFaults ? snapshot(target.path) : nil
            let blocks = blocks.snapshot([sourceState.owner, targetState.owner, caller])
            let refusals = model.read(owner: sourceState.owner, by: caller, isolated: sourceState.isolated, blocks)
                .union(model.modify(owner: targetState.owner, by: caller, newOwner: sourceState.owner, isolated: targetState.isolated, blocks))
                .union(creates ? model.create(for: sourceState.owner, blocks) : [])
            let what = describe(sourceState.owner, targetState.owner)
            let result = call(caller, sync: write, async: writeAsync)
            // A wrong allowance is sorted by the source's data (what reached the target's place).
            switch judge(api, what, refusals: refusals, blocks: blocks, secret: sourceState.plaintext, owner: sourceState.owner,
                         isolated: sourceState.isolated, also: (targetState.owner, targetState.isolated), result.withoutData) {
            case .allowed:
                targetState.isolated = isolation(after: sourceState.isolated, owner: sourceState.owner, blocks)
                targetState.owner = sourceState.owner
                targetState.plaintext = sourceState.plaintext
                if target.kind == .streamFile { targetState.retired = true } else { verify(target, state: targetState, api: api, what: what) }
            case .refused:
                checkUnchanged(target.path, before: before, api, what)
            case .interrupted:
                if let intact { checkIntact(target.path, before: intact, api, what) }
                targetState.retired = intact.map { $0 != snapshot(target.path) } ?? true
            case .violated:
                if result.isSuccess { foreignModifications.add(1, ordering: .relaxed) }
                targetState.retired = true
            case .undecided:
                targetState.retired = true
            }
        }
    }

    // MARK: Calling

    /// The name of the program's raw worker threads (for debuggers).
    static let workerThreadName = "isolation-stress-worker"
    /// The key, in a worker thread's `threadDictionary`, that marks it as one of the program's own threads.
    /// Not the thread's name: Foundation on Linux answers `Thread.current.name` with the process's name.
    static let workerThreadKey = "IsolationStress.worker"

    /// One call of the protection API as `caller`: synchronously; or, with the key-store faults and on a
    /// worker thread of the program (never in a task or on a queue), through the `.async` API in a task of its own, awaited here,
    /// and with ``IsolationStress/FaultClass/cancellation`` cancelled after a random delay (0 to 4 ms: before,
    /// during or after its waits on the key store).
    func call<T: Sendable>(
        _ caller: Identity?, sync: () throws -> T, async: @escaping @Sendable () async throws -> T
    ) -> Result<T, any Error> {
        // Only the program's own threads await a task: a GCD thread that a task waits for (a queue read) must
        // never wait in turn for the cooperative pool that task occupies.
        let onThread = Thread.current.threadDictionary[Self.workerThreadKey] as? Bool == true
        let cancels = options.faults.contains(.cancellation)
        let (useAsync, cancelAfter) = dice.withLock { dice -> (Bool, UInt32?) in
            guard storeFaults, onThread else { return (false, nil) }
            let useAsync = cancels || dice.next() % 2 == 0
            // A third of the cancellations before the task runs (it meets them at its first wait), the rest
            // during its first milliseconds.
            let delay = dice.next() % 3 == 0 ? 0 : UInt32(dice.next() % 4000)
            return (useAsync, cancels && dice.next() % 2 == 0 ? delay : nil)
        }
        guard useAsync else {
            do { return .success(try IdentityContext.withThreadIdentity(caller) { try sync() }) } catch { return .failure(error) }
        }
        let answer = Answer<T>()
        let task = Task {
            do {
                answer.give(.success(try await IdentityContext.withThreadIdentity(caller) { try await async() }))
            } catch {
                answer.give(.failure(error))
            }
        }
        if let cancelAfter {
            usleep(cancelAfter)
            if !answer.isGiven { cancellations.add(1, ordering: .relaxed) }
            task.cancel()
        }
        return answer.wait()
    }
}

/// The result of a task, awaited by a thread.
final class Answer<T: Sendable>: Sendable {
    private let value = LockedValue<Result<T, any Error>?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    /// Whether the task has answered.
    var isGiven: Bool { value.withLock { $0 != nil } }

    func give(_ result: Result<T, any Error>) {
        value.withLock { $0 = result }
        ready.signal()
    }

    func wait() -> Result<T, any Error> {
        ready.wait()
        return value.withLock { $0! }
    }
}

extension Result {
    /// What a call that returns no bytes came to, for ``World/judge``.
    var withoutData: Result<Data?, Failure> { map { _ in nil } }

    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }

    var isFailure: Bool { !isSuccess }
}
