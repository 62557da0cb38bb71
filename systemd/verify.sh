#!/bin/sh
# Checks the unit files and snippets in this directory with systemd's own tools:
#   systemd-analyze verify       speakd.service and speakd-ssip.socket (system),
#                                user/speakd.service and user/speakd-ssip.socket (user manager)
#   systemd-sysusers --root      speakd.sysusers, into a scratch root
#   systemd-tmpfiles --root      speakd.tmpfiles, into the same scratch root
#   grep                         limits in both units; the user unit's config file
#   systemd-analyze security     both units' exposure at most 1.5
# The units name /usr/local/bin/speakd, which verify requires to exist; they are checked as
# copies with ExecStart pointing at SPEAKD (default: the debug build). Any warning fails.
#
# Usage: systemd/verify.sh [PATH-TO-SPEAKD]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
speakd=${1:-"$here/../.build/debug/speakd"}
speakd=$(cd "$(dirname "$speakd")" && pwd)/$(basename "$speakd")
if [ ! -x "$speakd" ]; then
    echo "verify.sh: $speakd is not an executable; build it first (swift build)" >&2
    exit 2
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/system" "$scratch/user" "$scratch/run" "$scratch/root/etc"
chmod 700 "$scratch/run"

failed=0
check() {
    # $1: what is checked; the rest: the command. Fails on a non-zero exit or any output.
    what=$1
    shift
    if ! output=$("$@" 2>&1) || [ -n "$output" ]; then
        echo "FAIL $what"
        [ -n "$output" ] && echo "$output" | sed 's/^/    /'
        failed=1
    else
        echo "ok   $what"
    fi
}

sed "s#^ExecStart=/usr/local/bin/speakd#ExecStart=$speakd#" "$here/speakd.service" > "$scratch/system/speakd.service"
sed "s#^ExecStart=/usr/local/bin/speakd#ExecStart=$speakd#" "$here/user/speakd.service" > "$scratch/user/speakd.service"
cp "$here/user/speakd-ssip.socket" "$scratch/user/"
cp "$here/speakd-ssip.socket" "$scratch/system/"
check "speakd.service" systemd-analyze verify --man=no "$scratch/system/speakd.service"
check "user/speakd.service" env XDG_RUNTIME_DIR="$scratch/run" systemd-analyze --user verify --man=no "$scratch/user/speakd.service"
check "speakd-ssip.socket" systemd-analyze verify --man=no "$scratch/system/speakd-ssip.socket"
# The system SSIP socket: the speakd group's (0660), outside the service's RuntimeDirectory=
# (removed at each stop), passed as 'ssip' to speakd.service.
check "speakd-ssip.socket is 0660 group speakd and passes 'ssip' to speakd.service" sh -c "grep -q '^SocketMode=0660\$' '$here/speakd-ssip.socket' && grep -q '^SocketGroup=speakd\$' '$here/speakd-ssip.socket' && grep -q '^FileDescriptorName=ssip\$' '$here/speakd-ssip.socket' && grep -q '^Service=speakd.service\$' '$here/speakd-ssip.socket' && grep -q '^ListenStream=/run/speakd-ssip/' '$here/speakd-ssip.socket'"
check "user/speakd-ssip.socket" env XDG_RUNTIME_DIR="$scratch/run" systemd-analyze --user verify --man=no "$scratch/user/speakd-ssip.socket"
# The SSIP socket is systemd's, named as speakd looks for it, and the user unit listens on it.
check "user/speakd-ssip.socket passes 'ssip' to speakd.service" sh -c "grep -q '^FileDescriptorName=ssip\$' '$here/user/speakd-ssip.socket' && grep -q '^Service=speakd.service\$' '$here/user/speakd-ssip.socket' && grep -q '^Environment=SPEAKD_SSIP=%t/speech-dispatcher/speechd.sock\$' '$here/user/speakd.service'"
# Both units bound descriptors and memory: connections are limited below LimitNOFILE, and
# MemoryMax is the backstop for every bounded buffer.
for unit in speakd.service user/speakd.service; do
    check "$unit sets LimitNOFILE= and MemoryMax=" sh -c "grep -q '^LimitNOFILE=[0-9]' '$here/$unit' && grep -q '^MemoryMax=[0-9]' '$here/$unit'"
done

# Both units read the same 'key = value' file format: the user unit through ConfigurationDirectory=
# ($CONFIGURATION_DIRECTORY/speakd.conf), never an environment file of another format.
check "user/speakd.service reads speakd.conf, not an EnvironmentFile=" sh -c "grep -q '^ConfigurationDirectory=speakd\$' '$here/user/speakd.service' && ! grep -q '^EnvironmentFile=' '$here/user/speakd.service' '$here/speakd.service'"

# Exposure as systemd-analyze security scores it: at most 1.5 for both units (the user unit's
# remaining points are explained in it).
exposure() {
    # $1: the unit copy; the rest: extra systemd-analyze options. Prints the overall exposure.
    unit=$1
    shift
    env XDG_RUNTIME_DIR="$scratch/run" systemd-analyze "$@" security --offline=true --no-pager "$unit" 2>/dev/null |
        sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}
for unit in system user; do
    option=""
    [ "$unit" = user ] && option="--user"
    level=$(exposure "$scratch/$unit/speakd.service" $option)
    check "$unit unit exposure $level is at most 1.5" awk -v level="$level" 'BEGIN { exit !(level != "" && level <= 1.5) }'
done

# sysusers adds to the scratch root's group file; the audio group comes from a stock one.
printf 'audio:x:29:\n' > "$scratch/root/etc/group"
: > "$scratch/root/etc/passwd"
check "speakd.sysusers" sh -c "systemd-sysusers --root='$scratch/root' '$here/speakd.sysusers' >/dev/null 2>&1 && grep -q '^speakd:' '$scratch/root/etc/passwd' && grep -q '^audio:.*speakd' '$scratch/root/etc/group'"
check "speakd.tmpfiles" systemd-tmpfiles --root="$scratch/root" --create "$here/speakd.tmpfiles"
uid=$(grep '^speakd:' "$scratch/root/etc/passwd" | cut -d: -f3)
check "/run/speakd is mode 0750, owned by speakd" test "$(stat -c '%a %u' "$scratch/root/run/speakd")" = "750 $uid"

exit $failed
