#include <fcntl.h>
#include <malloc.h>
#include <sys/prctl.h>
#include <unistd.h>

/// Names the calling thread (at most 15 bytes are kept). prctl is variadic, which Swift cannot
/// call, and pthread_setname_np needs _GNU_SOURCE.
static inline int speakd_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/// A pipe whose two ends close on exec, made in one call so that no child spawned by another
/// thread meanwhile inherits them (pipe2 is declared only under _GNU_SOURCE).
int pipe2(int pipefd[2], int flags);
static inline int speakd_cloexec_pipe(int ends[2]) {
    return pipe2(ends, O_CLOEXEC);
}
