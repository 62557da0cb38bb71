#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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

/// A connected pair of Unix stream sockets whose ends close on exec: the engine worker
/// template's control channel, which carries descriptors.
static inline int speakd_cloexec_socketpair(int ends[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends);
}

/// Adds a file action closing every descriptor from `lowest` up (glibc 2.34; declared only under
/// _GNU_SOURCE, which Swift's Glibc module is not built with).
int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int lowest);
static inline int speakd_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

/// One message of the descriptor channel: one byte, with room for at most 4 descriptors in its
/// control data (aligned as a cmsghdr must be).
struct speakd_descriptor_message {
    char byte;
    struct iovec vector;
    union {
        char buffer[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    struct msghdr message;
};

/// Readies `channel` to send or receive `count` descriptors (1 to 4). Returns 0, or -1 with errno
/// EINVAL for another count.
static inline int speakd_descriptor_message_init(struct speakd_descriptor_message *channel, int count) {
    if (count < 1 || count > 4) {
        errno = EINVAL;
        return -1;
    }
    memset(channel, 0, sizeof *channel);
    channel->byte = 'W';
    channel->vector = (struct iovec){.iov_base = &channel->byte, .iov_len = 1};
    channel->message = (struct msghdr){
        .msg_iov = &channel->vector, .msg_iovlen = 1, .msg_control = channel->control.buffer,
        .msg_controllen = CMSG_SPACE(sizeof(int) * count)};
    return 0;
}

/// Sends one byte with `count` descriptors attached (SCM_RIGHTS). Returns 0, or -1 with errno.
static inline int speakd_send_descriptors(int socket, const int *descriptors, int count) {
    struct speakd_descriptor_message channel;
    if (speakd_descriptor_message_init(&channel, count) != 0) return -1;
    struct msghdr *message = &channel.message;
    struct cmsghdr *header = CMSG_FIRSTHDR(message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(header), descriptors, sizeof(int) * count);
    ssize_t sent;
    do {
        sent = sendmsg(socket, message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent == 1 ? 0 : -1;
}

/// Receives one byte and the descriptors attached to it (at most `capacity`, close-on-exec).
/// Returns how many arrived, 0 at end of stream, or -1 with errno.
static inline int speakd_receive_descriptors(int socket, int *descriptors, int capacity) {
    struct speakd_descriptor_message channel;
    if (speakd_descriptor_message_init(&channel, capacity) != 0) return -1;
    struct msghdr *message = &channel.message;
    ssize_t received;
    do {
        received = recvmsg(socket, message, MSG_CMSG_CLOEXEC);
    } while (received < 0 && errno == EINTR);
    if (received <= 0) return (int)received;
    int count = 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(message); header != NULL; header = CMSG_NXTHDR(message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        int arrived = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int index = 0; index < arrived; index++) {
            int descriptor;
            memcpy(&descriptor, CMSG_DATA(header) + sizeof(int) * index, sizeof(int));
            if (count < capacity) {
                descriptors[count++] = descriptor;
            } else {
                close(descriptor);
            }
        }
    }
    return count;
}

/// Has the kernel send `signal` to the calling process when its parent ends (prctl is variadic).
static inline int speakd_set_parent_death_signal(int signal) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)signal, 0UL, 0UL, 0UL);
}

/// Blocks SIGCHLD and returns a descriptor that becomes readable when it is pending
/// (signalfd, non-blocking, close-on-exec), or -1 with errno.
static inline int speakd_child_signal_descriptor(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/// Unblocks SIGCHLD again (in a child of the process that blocked it).
static inline int speakd_unblock_child_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    return sigprocmask(SIG_UNBLOCK, &set, NULL);
}


/// Closes every descriptor from `lowest` up, except `keep` (-1 for none): what a newly forked
/// engine worker does once its pipes are its standard streams. close_range where the kernel has
/// it (5.9), else one close per descriptor up to the limit.
static inline void speakd_close_descriptors_from(int lowest, int keep) {
    unsigned int first = (unsigned int)lowest;
    if (keep >= lowest) {
        if (keep > lowest) {
            if (syscall(SYS_close_range, first, (unsigned int)keep - 1, 0) != 0) {
                for (int descriptor = lowest; descriptor < keep; descriptor++) close(descriptor);
            }
        }
        first = (unsigned int)keep + 1;
    }
    if (syscall(SYS_close_range, first, ~0U, 0) != 0) {
        long limit = sysconf(_SC_OPEN_MAX);
        for (long descriptor = first; descriptor < limit; descriptor++) close((int)descriptor);
    }
}

/// The leading fields of glibc's `struct dl_phdr_info`, which dl_iterate_phdr hands its callback
/// (both are declared only under _GNU_SOURCE; these fields are glibc's ABI since 2.2.4).
struct speakd_loaded_object {
    ElfW(Addr) address;
    const char *name;
    const ElfW(Phdr) *headers;
    ElfW(Half) count;
};
struct dl_phdr_info;
int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data);

/// Whether a loaded object relocates its own code at load (DT_TEXTREL): its code pages are then
/// private copies, which MADV_DONTNEED would turn back into the unrelocated file.
static inline int speakd_object_relocates_code(const struct speakd_loaded_object *object) {
    for (int i = 0; i < object->count; i++) {
        if (object->headers[i].p_type != PT_DYNAMIC) continue;
        for (const ElfW(Dyn) *entry = (const ElfW(Dyn) *)(object->address + object->headers[i].p_vaddr);
             entry->d_tag != DT_NULL; entry++) {
            if (entry->d_tag == DT_TEXTREL) return 1;
            if (entry->d_tag == DT_FLAGS && (entry->d_un.d_val & DF_TEXTREL)) return 1;
        }
    }
    return 0;
}

struct speakd_code_release {
    size_t bytes;
    uintptr_t page;
};
static int speakd_release_object_code(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const struct speakd_loaded_object *object = (const struct speakd_loaded_object *)info;
    struct speakd_code_release *release = data;
    // The vDSO is the kernel's own mapping, not a file's: known by its name where glibc gives
    // one, and by its address (the auxiliary vector's) where the name differs.
    if (object->name != NULL && strncmp(object->name, "linux-vdso", 10) == 0) return 0;
    if (object->address == (uintptr_t)getauxval(AT_SYSINFO_EHDR)) return 0;
    if (speakd_object_relocates_code(object)) return 0;
    for (int i = 0; i < object->count; i++) {
        const ElfW(Phdr) *segment = &object->headers[i];
        if (segment->p_type != PT_LOAD || !(segment->p_flags & PF_X) || (segment->p_flags & PF_W)) continue;
        uintptr_t first = object->address + segment->p_vaddr;
        uintptr_t start = first & ~(release->page - 1);
        uintptr_t end = (first + segment->p_memsz + release->page - 1) & ~(release->page - 1);
        if (madvise((void *)start, end - start, MADV_DONTNEED) == 0) release->bytes += end - start;
    }
    return 0;
}

/// Drops the calling process's mappings of its code: each loaded object's (the program's and
/// every shared library's) segments that are executable and not writable, with MADV_DONTNEED.
/// They are clean pages of their files, so they stay in the page cache and the next call into
/// them maps them again with a minor fault. Returns the bytes of address space advised.
static inline size_t speakd_release_code_pages(void) {
    struct speakd_code_release release = {0, (uintptr_t)sysconf(_SC_PAGESIZE)};
    dl_iterate_phdr(speakd_release_object_code, &release);
    return release.bytes;
}
