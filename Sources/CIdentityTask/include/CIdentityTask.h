#ifndef C_IDENTITY_TASK_H
#define C_IDENTITY_TASK_H

/// The address of the Swift task running on this thread, or NULL outside every task. Only for comparing:
/// never dereference it, and compare it only while that task is known to be running.
const void *_Nullable identity_current_task(void);

#endif
