// Include guard: the module map and Swift's importer may both pull this header in.
#ifndef SPEAKD_CSECCOMP_SHIM_H
#define SPEAKD_CSECCOMP_SHIM_H

// libseccomp: builds and loads the engine worker's system-call filter (seccomp_init, seccomp_rule_add_array).
#include <seccomp.h>
// prctl and PR_SET_NO_NEW_PRIVS, which seccomp and Landlock both require of an unprivileged process.
#include <sys/prctl.h>
// syscall() and the __NR_landlock_* numbers: glibc 2.36 has no Landlock wrappers.
#include <sys/syscall.h>
#include <unistd.h>
// O_CLOEXEC for the paths added to a Landlock ruleset.
#include <fcntl.h>
// O_PATH opens a path for Landlock without reading it; glibc declares it only under _GNU_SOURCE,
// which Swift's Glibc module is not built with. Its value on x86_64 and arm64.
#ifndef O_PATH
#define O_PATH 010000000
#endif
// CLONE_THREAD, which tells a new thread from a new process in the seccomp filter.
#include <linux/sched.h>
// The Landlock ruleset and path-beneath structures and their access rights.
#include <linux/landlock.h>
// uint32_t, uint64_t, size_t for the wrappers below.
#include <stdint.h>
#include <stddef.h>

// Swift cannot call C's variadic functions (prctl, syscall) or function-like macros
// (SCMP_ACT_ERRNO): these wrappers give it plain functions with fixed arguments.

// Forbids gaining privileges through exec (setuid, file capabilities) for good.
static inline int speakd_set_no_new_privs(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

// The seccomp action "fail the call with errno": visible errors, not a killed worker.
static inline uint32_t speakd_scmp_act_errno(uint32_t error) {
    return SCMP_ACT_ERRNO(error);
}

// The ruleset attribute with the network field of newer kernels (ABI 4), which Debian 12's
// header lacks; the kernel reads as many bytes as the size it is given.
struct speakd_landlock_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
};

// The attribute with the scopes of ABI 6 (signals and abstract Unix sockets), likewise.
struct speakd_landlock_ruleset_attr_scoped {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

// Returns the highest Landlock ABI the kernel supports, or -1 with errno (ENOSYS, EOPNOTSUPP).
static inline int speakd_landlock_abi(void) {
    return (int)syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
}

// Creates a ruleset handling `fs` rights (file-system access not granted by a rule is denied).
static inline int speakd_landlock_create_ruleset(uint64_t fs) {
    struct speakd_landlock_ruleset_attr attr = {.handled_access_fs = fs, .handled_access_net = 0};
    return (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr.handled_access_fs), 0);
}

// Creates a ruleset handling `fs` and `net` rights and the `scoped` interactions (ABI 6: signals
// and abstract Unix sockets reach only processes in the same Landlock domain or nested ones).
static inline int speakd_landlock_create_scoped_ruleset(uint64_t fs, uint64_t net, uint64_t scoped) {
    struct speakd_landlock_ruleset_attr_scoped attr = {
        .handled_access_fs = fs, .handled_access_net = net, .scoped = scoped};
    size_t size = scoped != 0 ? sizeof(attr) : net != 0 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
    return (int)syscall(__NR_landlock_create_ruleset, &attr, size, 0);
}

// Grants `allowed` rights beneath the directory or file open as `parent`.
static inline int speakd_landlock_allow_beneath(int ruleset, int parent, uint64_t allowed) {
    struct landlock_path_beneath_attr attr = {.allowed_access = allowed, .parent_fd = parent};
    return (int)syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
}

// Confines the calling process (every thread, and anything it would start) to the ruleset.
static inline int speakd_landlock_restrict_self(int ruleset) {
    return (int)syscall(__NR_landlock_restrict_self, ruleset, 0);
}

// Capabilities and identity, for a worker template started by a daemon running as root. glibc
// declares setresuid and setresgid only under _GNU_SOURCE; its wrappers (not the raw calls) change
// every thread of the process.
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/types.h>
int setresuid(uid_t ruid, uid_t euid, uid_t suid);
int setresgid(gid_t rgid, gid_t egid, gid_t sgid);

// Whether capability `capability` is in the calling thread's bounding set: 1, 0, or -1 with errno
// (EINVAL past the last capability the kernel knows).
static inline int speakd_capability_bounded(int capability) {
    return prctl(PR_CAPBSET_READ, (unsigned long)capability, 0UL, 0UL, 0UL);
}

// Removes `capability` from the bounding set (needs CAP_SETPCAP).
static inline int speakd_drop_bounded_capability(int capability) {
    return prctl(PR_CAPBSET_DROP, (unsigned long)capability, 0UL, 0UL, 0UL);
}

// Empties the ambient set.
static inline int speakd_clear_ambient_capabilities(void) {
    return prctl(PR_CAP_AMBIENT, (unsigned long)PR_CAP_AMBIENT_CLEAR_ALL, 0UL, 0UL, 0UL);
}

// Empties the effective, permitted and inheritable sets of the calling thread.
static inline int speakd_clear_capabilities(void) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
    return (int)syscall(__NR_capset, &header, data);
}

// Whether the calling thread holds any capability (effective, permitted or inheritable): 1, 0,
// or -1 with errno.
static inline int speakd_holds_capabilities(void) {
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    if (syscall(__NR_capget, &header, data) != 0) return -1;
    for (int index = 0; index < 2; index++) {
        if (data[index].effective | data[index].permitted | data[index].inheritable) return 1;
    }
    return 0;
}

// End of the include guard.
#endif
