#include "CIdentityTask.h"

// The Concurrency runtime's entry point, the one `withUnsafeCurrentTask` and the compiler's task-local code
// call: it reads a thread-local and neither retains nor allocates. Swift code may not name a runtime symbol
// (the compiler reserves them), so the runtime reaches it through this C function. The public
// `withUnsafeCurrentTask(body:)` gets the same answer through a generic call of about 250 instructions, paid on
// every synchronous scope and queued unit; `CurrentTaskTests` pins that both say the same.
extern __attribute__((swiftcall)) const void *_Nullable swift_task_getCurrent(void);

const void *_Nullable identity_current_task(void) {
    return swift_task_getCurrent();
}
