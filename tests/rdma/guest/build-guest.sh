#!/bin/bash
# Build a qemu guest (Debian bookworm kernel + minbase initramfs) with Soft-RoCE (rdma_rxe).
#
#   build-guest.sh OUT_DIR
#
# Produces OUT_DIR/vmlinuz and OUT_DIR/initramfs.cpio.zst, used by run-in-guest.sh.
# If OUT_DIR already holds a complete build made from the same inputs (this script, kernel
# package version, mirror, package list; recorded in OUT_DIR/stamp) nothing is rebuilt.
# Must run as root (debootstrap). Env: DEBIAN_MIRROR (default: the bookworm/main mirror apt
# uses), GUEST_REBUILD=1 forces a rebuild.
set -euo pipefail

die() { echo "build-guest: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build-guest.sh OUT_DIR"
OUT=$1

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap needs it)"
need() { command -v "$1" >/dev/null 2>&1 || die "missing tool '$1': apt-get install $2"; }
need debootstrap debootstrap
need zstd zstd
need cpio cpio
need modprobe kmod
need depmod kmod
need dpkg-deb dpkg
need apt-get apt
need qemu-system-x86_64 qemu-system-x86   # not used here, but the guest is useless without it

SUITE=bookworm
PACKAGES=rdma-core,ibverbs-providers,ibverbs-utils,rdmacm-utils,perftest,iproute2,kmod
# crc32_generic: rdma_rxe asks the crypto API for crc32 at run time (not a modprobe dependency).
MODULES="crc32_generic virtio_pci 9pnet_virtio 9p dummy rdma_rxe ib_uverbs rdma_ucm"

# --- inputs -------------------------------------------------------------------------------
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
       sed -n 's/^ *Depends: \(linux-image-6\.1\.[0-9.]*-[0-9]*-amd64\)$/\1/p' | head -n1)
[ -n "$KPKG" ] || die "apt offers no linux-image-6.1.*-amd64 (is the $SUITE archive in apt's sources? run apt-get update)"
KPKG_VER=$(apt-cache policy "$KPKG" | sed -n 's/^ *Candidate: //p')
KVER=${KPKG#linux-image-}

MIRROR=${DEBIAN_MIRROR:-$(apt-cache policy | sed -n "s|^ *[0-9]* \(https\?://[^ ]*\) $SUITE/main amd64 Packages$|\1|p" | head -n1)}
[ -n "$MIRROR" ] || die "cannot find the $SUITE/main mirror in apt's sources; set DEBIAN_MIRROR"

SELF_SUM=$(sha256sum "$0" | cut -d' ' -f1)
STAMP_TEXT="script=$SELF_SUM
kernel=$KPKG $KPKG_VER
mirror=$MIRROR
suite=$SUITE
packages=$PACKAGES
modules=$MODULES"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
if [ "${GUEST_REBUILD:-0}" != 1 ] && [ -s "$OUT/vmlinuz" ] && [ -s "$OUT/initramfs.cpio.zst" ] &&
   [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$STAMP_TEXT" ]; then
    echo "build-guest: $OUT is up to date ($KPKG $KPKG_VER)"
    exit 0
fi
rm -f "$OUT/stamp"

WORK=$(mktemp -d "$OUT/.work.XXXXXX")

cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

# --- kernel -------------------------------------------------------------------------------
echo "build-guest: kernel $KPKG $KPKG_VER"
(cd "$WORK" && apt-get download -q -o APT::Sandbox::User=root "$KPKG=$KPKG_VER" >/dev/null) || die "apt-get download $KPKG failed"
mkdir "$WORK/k"
dpkg-deb -x "$WORK"/"$KPKG"_*.deb "$WORK/k"
KMODDIR=
for d in "$WORK/k/lib/modules/$KVER" "$WORK/k/usr/lib/modules/$KVER"; do
    [ -d "$d" ] && KMODDIR=$d && break
done
[ -n "$KMODDIR" ] || die "no modules for $KVER in $KPKG"
KBASE=${KMODDIR%/lib/modules/$KVER}
[ -f "$WORK/k/boot/vmlinuz-$KVER" ] || die "no boot/vmlinuz-$KVER in $KPKG"
depmod -b "$KBASE" "$KVER"

# --- root filesystem ----------------------------------------------------------------------
echo "build-guest: debootstrap $SUITE from $MIRROR"
ROOT=$WORK/root
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1; then
    tail -n 20 "$WORK/debootstrap.log" >&2
    die "debootstrap failed"
fi
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* \
       "$ROOT"/usr/share/doc "$ROOT"/usr/share/man "$ROOT"/usr/share/info "$ROOT"/usr/share/locale

# Only the modules we need, with their dependencies.
mkdir -p "$ROOT/lib/modules/$KVER"
for m in $MODULES; do
    modprobe -d "$KBASE" -S "$KVER" --show-depends "$m" >"$WORK/deps" ||
        die "module $m not found in $KPKG"
    while read -r kind path _; do
        [ "$kind" = insmod ] || continue            # 'builtin X' lines need nothing
        rel=${path#"$KBASE"}
        mkdir -p "$ROOT/$(dirname "$rel")"
        cp "$path" "$ROOT/$rel"
    done <"$WORK/deps"
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
    [ -f "$KMODDIR/$f" ] && cp "$KMODDIR/$f" "$ROOT/lib/modules/$KVER/"
done
depmod -b "$ROOT" "$KVER"

# --- /init --------------------------------------------------------------------------------
cat >"$ROOT/init" <<'EOF'
#!/bin/sh
# Guest init: Soft-RoCE rxe0 on dummy0, host folders over 9p, run the command, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
off() { sync; echo o >/proc/sysrq-trigger; sleep 30; }
fail() {
    echo "guest-init: FAILED: $*"
    [ -d /share/.guest-run ] && echo "$*" >/share/.guest-run/init-error
    off
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /share /hostroot
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
# No udev: load every driver by hand. Order matters: crc32_generic before rdma_rxe,
# virtio_pci before the 9p mounts.
for m in crc32_generic virtio_pci 9pnet_virtio 9p dummy rdma_rxe ib_uverbs rdma_ucm; do
    modprobe "$m" || fail "modprobe $m"
done
# cache=loose: the guest keeps what it read in its page cache. Without it every process start
# reads the host's libraries again over 9p (6-14 s for one psbench-worker --version under TCG,
# 1-2 s with it). Safe here: the host changes neither share while the guest runs.
P9=trans=virtio,version=9p2000.L,msize=512000,cache=loose
mount -t 9p -o $P9 share /share || fail "mount 9p share"
mount -t 9p -o $P9,ro hostroot /hostroot || fail "mount 9p hostroot"
[ -f /share/.guest-run/params ] || fail "no /share/.guest-run/params"
. /share/.guest-run/params          # SHARE_PATH CMD_TIMEOUT USE_CHROOT

ip link set lo up
ip link set dummy0 up || fail "dummy0"
ip addr add 192.0.2.1/24 dev dummy0
rdma link add rxe0 type rxe netdev dummy0 || fail "rdma link add rxe0"
i=0
while :; do
    read -r st </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
    case "$st" in *ACTIVE*) break ;; esac
    i=$((i + 1)); [ $i -lt 100 ] || fail "rxe0 not ACTIVE ($st)"
    sleep 0.1
done
echo "guest-init: rxe0 $st"

if [ "$USE_CHROOT" = 1 ]; then
    R=/hostroot
    mount -t proc proc $R/proc || fail "mount proc in host root"
    mount -t sysfs sysfs $R/sys || fail "mount sys in host root"
    mount --rbind /dev $R/dev || fail "bind dev in host root"
    mount -t tmpfs tmpfs $R/tmp || fail "tmpfs on host root /tmp"
    mount -t tmpfs tmpfs $R/run || fail "tmpfs on host root /run"
    mkdir -p "$R$SHARE_PATH" 2>/dev/null   # only possible under the fresh /tmp or /run
    mount --bind /share "$R$SHARE_PATH" || fail "bind share at $SHARE_PATH"
    RUN="chroot $R"
else
    mkdir -p "$(dirname "$SHARE_PATH")"
    ln -sfn /share "$SHARE_PATH"
    RUN=
fi
echo "guest-init: running command (timeout ${CMD_TIMEOUT}s)"
$RUN /usr/bin/env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 TERM=dumb \
    /usr/bin/timeout -k 5 "$CMD_TIMEOUT" /bin/bash "$SHARE_PATH/.guest-run/cmd" \
    >/share/guest-output.log 2>&1 </dev/null
rc=$?
echo "guest-init: command exited $rc"
echo $rc >/share/guest-exit-code
off
EOF
chmod 755 "$ROOT/init"

# --- pack ---------------------------------------------------------------------------------
echo "build-guest: packing initramfs"
(cd "$ROOT" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) |
    zstd -3 -T0 -q >"$WORK/initramfs.cpio.zst"
cp "$WORK/k/boot/vmlinuz-$KVER" "$WORK/vmlinuz"
mv -f "$WORK/vmlinuz" "$OUT/vmlinuz"
mv -f "$WORK/initramfs.cpio.zst" "$OUT/initramfs.cpio.zst"
printf '%s\n' "$STAMP_TEXT" >"$OUT/stamp"
echo "build-guest: done: $OUT ($KVER, initramfs $(du -h "$OUT/initramfs.cpio.zst" | cut -f1))"
