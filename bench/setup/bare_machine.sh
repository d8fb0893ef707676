#!/usr/bin/env bash
# Times the README's first command on a bare Debian machine: a fresh debootstrap of
# Debian bookworm (minbase, nothing else installed, an empty ccache), a clone of this
# checkout's HEAD inside it, then `scripts/setup.sh && build/bin/headroom run
# configs/addition-text-qwen2.yaml` in a chroot, each phase timed. Needs root, debootstrap
# and Debian's mirror; about 2 GB of disk under $BARE_ROOT. Run it on an otherwise idle
# machine: the wall times are the result, and the CPU seconds say how much of each phase
# was computing.
#
#   bench/setup/bare_machine.sh [BARE_ROOT]     (default /tmp/headroom-bare)
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
root=${1:-/tmp/headroom-bare}
if [ "$(id -u)" != 0 ]; then echo "bare_machine: needs root (debootstrap, chroot, mount)" >&2; exit 2; fi
command -v debootstrap >/dev/null || { echo "bare_machine: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
if [ -e "$root" ]; then echo "bare_machine: $root exists; give a path that does not" >&2; exit 2; fi

mounts=()
cleanup() { for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done; }
trap cleanup EXIT

debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$root.debootstrap.log" 2>&1 ||
  { echo "bare_machine: debootstrap failed (log: $root.debootstrap.log)" >&2; exit 1; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
cat >"$root/etc/apt/sources.list" <<'SOURCES'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
# /proc, /dev and /sys with its cgroup mounts: the job puts its worker in a memory cgroup.
for m in proc dev dev/pts; do mount --bind "/$m" "$root/$m"; mounts+=("$root/$m"); done
mount --rbind /sys "$root/sys"; mounts+=("$root/sys")
git clone -q "$repo" "$root/root/headroom"

cat >"$root/root/timed.sh" <<'TIMED'
#!/bin/bash
cd /root/headroom
export HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# cpu VAR: VAR = CPU seconds of this shell's finished children so far. `times` runs in this
# shell: in a command substitution's subshell it would count that subshell's children only.
cpu() { times >/root/times.txt; printf -v "$1" '%s' "$(tail -1 /root/times.txt | awk '{ split($1, u, "m"); split($2, s, "m"); printf "%.0f", u[1]*60 + u[2] + s[1]*60 + s[2] }')"; }
t0=$(date +%s)
scripts/deps.sh run >/root/deps.log 2>&1 || { echo "deps failed: /root/deps.log"; exit 1; }
t1=$(date +%s); cpu c1
scripts/setup.sh >/root/build.log 2>&1 || { echo "build failed: /root/build.log"; exit 1; }
t2=$(date +%s); cpu c2
build/bin/headroom run configs/addition-text-qwen2.yaml >/root/run.log 2>&1 || { echo "run failed: /root/run.log"; exit 1; }
t3=$(date +%s); cpu c3
echo "apt-get   $((t1 - t0)) s wall, ${c1} s CPU"
echo "build     $((t2 - t1)) s wall, $((c2 - c1)) s CPU"
echo "run       $((t3 - t2)) s wall, $((c3 - c2)) s CPU"
echo "total     $((t3 - t0)) s wall ($(( (t3 - t0) / 60 )) min $(( (t3 - t0) % 60 )) s)"
TIMED
chmod +x "$root/root/timed.sh"
echo "bare_machine: $(nproc) cores, $(git -C "$repo" rev-parse --short HEAD); the README's first command, phase by phase:"
chroot "$root" /root/timed.sh
