# Sourced by bench/gpu-run.sh on the GPU machine (bare: no liburing, no
# udev data): unpack Debian's liburing from .deps/ (carried, git-ignored:
# liburing-dev_*.deb and liburing2_*.deb from `apt-get download liburing-dev
# liburing2`), give cuFile the udev entry it needs for the root disk, and
# configure + build OpenDS in build-gpu/ (kept between calls while the
# machine stays warm). Sets OUT, LOGS (default $OUT), LD_LIBRARY_PATH and
# PKG_CONFIG_PATH.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/gpu-out}
LOGS=${LOGS:-$OUT}
mkdir -p "$OUT" "$LOGS"
step() { echo; echo "=== $* ($(date +%T))"; }

step "liburing from .deps"
dep=$PWD/.deps/root
libdir=$dep/usr/lib/x86_64-linux-gnu
if ! ls .deps/liburing*.deb >/dev/null 2>&1; then
	echo "no .deps/liburing*.deb: carry .deps (apt-get download liburing-dev liburing2 in it)"
elif [ ! -f "$libdir/pkgconfig/liburing.pc" ]; then
	rm -rf "$dep" && mkdir -p "$dep"
	for d in .deps/liburing*.deb; do dpkg -x "$d" "$dep"; done
	# the .pc names /usr: point it at the unpacked tree
	sed -i "s|=/usr|=$dep/usr|" "$libdir/pkgconfig/liburing.pc"
fi
export PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# cuFileHandleRegister needs udev's record of the block device under the
# file ("unable to get volume attributes" otherwise); the VM has no udev.
# (st_dev of the folders the data lives in, as cuFile looks it up)
mkdir -p /run/udev/data
for d in / /var/tmp; do
	dev=$(stat -c '%Hd:%Ld' "$d")
	printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' >"/run/udev/data/b$dev"
done

step "configure and build"
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
	--format=csv,noheader || true
if [ ! -f build-gpu/build.ninja ]; then
	meson setup build-gpu -During=enabled -Dcuda=enabled -Dcufile=auto >"$LOGS/setup.log" 2>&1 ||
		{ tail -30 "$LOGS/setup.log"; exit 1; }
fi
grep -A8 "Backends" "$LOGS/setup.log" 2>/dev/null
if ! ninja -C build-gpu >"$LOGS/build.log" 2>&1; then
	# keep the run useful: report, then build without the cuFile parts
	grep -B2 -A10 "error" "$LOGS/build.log" | head -40
	echo "BUILD FAILED with cuFile parts; retrying with -Dcufile=disabled"
	meson configure build-gpu -Dcufile=disabled >/dev/null &&
		ninja -C build-gpu >"$LOGS/build.log" 2>&1 || { grep -B2 -A10 "error" "$LOGS/build.log" | head -60; exit 1; }
fi
grep -i "warning" "$LOGS/build.log" | head -20
export LD_LIBRARY_PATH=$PWD/build-gpu/src:$LD_LIBRARY_PATH
