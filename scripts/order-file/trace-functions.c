// trace-functions: which of a program's own functions run, in the order they first run.
//
//   trace-functions SYMBOLS SECONDS OUTPUT PROGRAM [ARGUMENT...]
//
// SYMBOLS lists the program's functions, one "ADDRESS SIZE NAME" per line, hexadecimal, as
// `llvm-nm --defined-only --print-size` prints them for a position-independent executable
// (whose addresses count from the start of its first mapping). The program runs under ptrace with a breakpoint on the first byte of every one of them; a function
// is printed when one of its threads first reaches it, and its breakpoint is then removed, so
// each costs one trap. After SECONDS the program gets SIGTERM (SIGKILL a second later); what
// runs from then on is not printed.
//
// Written here because nothing packaged for this system records that without rebuilding the
// program: valgrind 3.19 cannot read the DWARF 5 this toolchain writes, and an instrumented
// build (-profile-generate) counts only source functions, not the metadata accessors, value
// witnesses and thunks the compiler generates, which start-up runs too.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct function {
    uint64_t address;
    long original;  // the word at `address` before the breakpoint
    char *name;
    int seen;
};

static struct function *functions;
static size_t count;

static int by_address(const void *a, const void *b) {
    uint64_t x = ((const struct function *)a)->address, y = ((const struct function *)b)->address;
    return x < y ? -1 : x > y;
}

static struct function *find(uint64_t address) {
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = (low + high) / 2;
        if (functions[middle].address == address) return &functions[middle];
        if (functions[middle].address < address) low = middle + 1; else high = middle;
    }
    return NULL;
}

// The address the executable is loaded at: the start of its first mapping.
static uint64_t load_base(pid_t pid, const char *program) {
    char path[64], line[4096], resolved[4096];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    if (!realpath(program, resolved)) { perror(program); exit(1); }
    FILE *maps = fopen(path, "r");
    if (!maps) { perror(path); exit(1); }
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, offset;
        char file[4096] = "";
        if (sscanf(line, "%lx-%*x %*s %lx %*s %*s %4095s", &start, &offset, file) == 3 && offset == 0 &&
            strcmp(file, resolved) == 0) {
            fclose(maps);
            return start;
        }
    }
    fprintf(stderr, "trace-functions: %s is not mapped in process %d\n", resolved, pid);
    exit(1);
}

static void read_symbols(const char *path) {
    FILE *file = fopen(path, "r");
    if (!file) { perror(path); exit(1); }
    size_t capacity = 1 << 16;
    functions = calloc(capacity, sizeof *functions);
    char line[8192];
    while (fgets(line, sizeof line, file)) {
        unsigned long offset, size;
        char name[8000];
        if (sscanf(line, "%lx %lx %7999s", &offset, &size, name) != 3 || size == 0) continue;
        if (count == capacity) functions = realloc(functions, (capacity *= 2) * sizeof *functions);
        functions[count++] = (struct function){.address = offset, .name = strdup(name)};
    }
    fclose(file);
    qsort(functions, count, sizeof *functions, by_address);
    // Aliases (identical code folded into one address) keep one breakpoint, listed by their first name.
    size_t kept = 0;
    for (size_t i = 0; i < count; i++)
        if (kept == 0 || functions[kept - 1].address != functions[i].address) functions[kept++] = functions[i];
    count = kept;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: trace-functions SYMBOLS SECONDS OUTPUT PROGRAM [ARGUMENT...]\n");
        return 2;
    }
    read_symbols(argv[1]);
    double seconds = atof(argv[2]);
    FILE *output = fopen(argv[3], "w");
    if (!output) { perror(argv[3]); return 1; }
    pid_t child = fork();
    if (child == 0) {
        fclose(output);
        ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        execv(argv[4], argv + 4);
        perror(argv[4]);
        _exit(127);
    }
    int status;
    waitpid(child, &status, 0);  // stopped at exec
    if (!WIFSTOPPED(status)) { fprintf(stderr, "trace-functions: %s did not start\n", argv[4]); return 1; }
    ptrace(PTRACE_SETOPTIONS, child, NULL,
        PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
    uint64_t base = load_base(child, argv[4]);
    for (size_t i = 0; i < count; i++) {
        functions[i].address += base;
        errno = 0;
        functions[i].original = ptrace(PTRACE_PEEKTEXT, child, functions[i].address, NULL);
        if (errno) { perror("PTRACE_PEEKTEXT"); return 1; }
        long patched = (functions[i].original & ~0xffL) | 0xcc;
        ptrace(PTRACE_POKETEXT, child, functions[i].address, patched);
    }
    fprintf(stderr, "trace-functions: %zu breakpoints in process %d\n", count, child);
    ptrace(PTRACE_CONT, child, NULL, NULL);

    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int signalled = 0;
    size_t seen = 0;
    for (;;) {
        pid_t thread = waitpid(-1, &status, __WALL | WNOHANG);
        if (thread == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            double elapsed = (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
            if (elapsed > seconds && signalled == 0) { kill(child, SIGTERM); signalled = 1; }
            if (elapsed > seconds + 1 && signalled == 1) { kill(child, SIGKILL); signalled = 2; }
            usleep(1000);
            continue;
        }
        if (thread < 0) break;  // every thread is gone
        if (!WIFSTOPPED(status)) continue;
        int signal = WSTOPSIG(status);
        int event = status >> 16;
        if (signal == SIGTRAP && (event == PTRACE_EVENT_CLONE || event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK)) {
            ptrace(PTRACE_CONT, thread, NULL, NULL);
            continue;
        }
        if (signal == SIGTRAP && event == PTRACE_EVENT_EXEC) {
            // A forked process that runs another program has none of the breakpoints, and that
            // program may want a tracer of its own.
            ptrace(PTRACE_DETACH, thread, NULL, NULL);
            continue;
        }
        if (signal == SIGTRAP) {
            struct user_regs_struct registers;
            ptrace(PTRACE_GETREGS, thread, NULL, &registers);
            struct function *function = find(registers.rip - 1);
            if (function) {
                // What runs once the program is told to stop is not what it runs idle.
                if (!function->seen && signalled == 0) {
                    function->seen = 1;
                    seen++;
                    fprintf(output, "%s\n", function->name);
                }
                // In this process; a process forked before may still have the breakpoint. Other
                // threads may share the word: only this function's byte is restored.
                long word = ptrace(PTRACE_PEEKTEXT, thread, function->address, NULL);
                ptrace(PTRACE_POKETEXT, thread, function->address, (word & ~0xffL) | (function->original & 0xff));
                registers.rip -= 1;
                ptrace(PTRACE_SETREGS, thread, NULL, &registers);
                ptrace(PTRACE_CONT, thread, NULL, NULL);
                continue;
            }
            signal = 0;  // a stop of ptrace's own (the first stop of a new thread)
        }
        if (signal == SIGSTOP) signal = 0;
        ptrace(PTRACE_CONT, thread, NULL, signal);
    }
    fclose(output);
    fprintf(stderr, "trace-functions: %zu of %zu functions ran\n", seen, count);
    return 0;
}
