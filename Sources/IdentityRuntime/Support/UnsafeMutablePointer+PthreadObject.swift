/// The life of a pthread object (`pthread_mutex_t`, `pthread_cond_t`) that ``LockedValue`` and
/// ``LockedCondition`` keep at a stable address: allocated and initialized together, destroyed and freed
/// together, every return code checked.
extension UnsafeMutablePointer {
    /// A new pthread object, `empty` initialized in place by `initialize` (`pthread_mutex_init`, say), which
    /// returns a pthread status; `name` names it in the failure.
    static func pthreadObject(_ empty: Pointee, _ name: StaticString, _ initialize: (Self) -> Int32) -> Self {
        let object = allocate(capacity: 1)
        object.initialize(to: empty)
        let status = initialize(object)
        precondition(status == 0, "\(name) failed with \(status)")
        return object
    }

    /// Destroys the pthread object with `destroy` (`pthread_mutex_destroy`, say), then frees it.
    func destroyPthreadObject(_ name: StaticString, _ destroy: (Self) -> Int32) {
        let status = destroy(self)
        precondition(status == 0, "\(name) failed with \(status)")
        deinitialize(count: 1)
        deallocate()
    }
}
