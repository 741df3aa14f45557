/// One sent element with its sender's identity, as the channel's storage holds it: a reference, so the
/// storage and its state machine are not generic.
@usableFromInline
class ChannelMessageBox: @unchecked Sendable {
    // Safety: every stored property is immutable and Sendable (the subclass's value is `Sendable`).
    @usableFromInline let snapshot: IdentitySnapshot
    /// The send site, when strict mode was on at the send and the channel requires the sender's identity.
    @usableFromInline let checkedSite: SubmitSite?

    @usableFromInline
    init(snapshot: IdentitySnapshot, checkedSite: SubmitSite?) {
        self.snapshot = snapshot
        self.checkedSite = checkedSite
    }

    /// Strict mode's check of a read of the value outside `run`: reports a read under another identity.
    @usableFromInline
    final func checkRead() {
        guard let checkedSite else { return }
        let observed = IdentityContext.currentThreadIdentity
        if observed != snapshot.identity {
            RuntimeIssues.report(
                .channelElementMisattributed(site: checkedSite, expected: snapshot.identity, observed: observed))
        }
    }
}

/// A ``ChannelMessageBox`` holding a value of the channel's element type.
@usableFromInline
final class ChannelElementBox<Value: Sendable>: ChannelMessageBox, @unchecked Sendable {
    @usableFromInline let value: Value

    @inlinable
    init(value: Value, snapshot: IdentitySnapshot, checkedSite: SubmitSite?) {
        self.value = value
        super.init(snapshot: snapshot, checkedSite: checkedSite)
    }
}
