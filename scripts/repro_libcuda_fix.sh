#!/usr/bin/env bash
# Reproduces the failure of seeds 000/001 on a GPU machine and cures it with `gpudoctor fix` as a
# normal user (no root): Triton's launcher linked with `-lcuda` against a driver directory that
# holds only libcuda.so.1.
#
# Run as root on a disposable GPU machine (the device machine), which it first turns into the
# seeds' machine and restores at the end: it edits the installed Triton's nvidia/driver.py back
# to the pre-PR-#8668 line `libraries = ['cuda']` (so Triton links `-lcuda`, as every Triton
# before 3.6 does), and moves aside any unversioned libcuda.so in the linker's default search
# directories (this image ships /lib/libcuda.so, which the seeds' machine did not have).
# Everything else runs as user `nobody` with a private HOME.
# Usage: scripts/repro_libcuda_fix.sh
set -uo pipefail
py=$(command -v python3)
repo=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/gpudoctor-repro
rm -rf "$work"; mkdir -p "$work/drv" "$work/home" "$work/build"
chmod 0755 "$work" "$work/drv"; chmod 0777 "$work/home" "$work/build"
real=$(/sbin/ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
ln -s "$real" "$work/drv/libcuda.so.1"          # a driver dir with only the versioned name
tdir=$("$py" -c 'import os, triton; print(os.path.dirname(triton.__file__))')
driver_py="$tdir/backends/nvidia/driver.py"
cp "$driver_py" "$work/driver.py.orig"
hidden=()
restore() {
  cp "$work/driver.py.orig" "$driver_py"
  for path in "${hidden[@]}"; do mv "$path.gpudoctor-hidden" "$path"; done
}
trap restore EXIT
for dir in /lib /usr/lib /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
  if [ -e "$dir/libcuda.so" ] && [ ! -e "$dir/libcuda.so.gpudoctor-hidden" ]; then
    mv "$dir/libcuda.so" "$dir/libcuda.so.gpudoctor-hidden" && hidden+=("$dir/libcuda.so")
    echo "## moved aside $dir/libcuda.so (restored at exit)"
  fi
done
sed -i "s/^libraries = \['libcuda.so.1'\]/libraries = ['cuda']/" "$driver_py"
echo "## Triton at $tdir now declares: $(grep '^libraries' "$driver_py")"

cat > "$work/launcher.c" <<'C'
int cuInit(unsigned int);
int launcher_probe(void) { return cuInit(0); }
C
cat > "$work/kernel.py" <<'PY'
import torch, triton, triton.language as tl

@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)

x = torch.arange(1000, device="cuda", dtype=torch.float32)
add_one[(triton.cdiv(1000, 256),)](x, 1000, BLOCK=256)
torch.cuda.synchronize()
assert torch.equal(x.cpu(), torch.arange(1, 1001, dtype=torch.float32)), "wrong result"
print("a real Triton kernel compiled, launched and computed the right result")
PY
chmod 0644 "$work"/*.c "$work"/*.py

# A normal user's environment: no LIBRARY_PATH (this image points it at the toolkit's stubs,
# which would hide the problem), Triton told where the driver lives, a cold kernel cache.
as_user() {
  setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin HOME="$work/home" \
    TRITON_LIBCUDA_PATH="$work/drv" TRITON_CACHE_DIR="$work/home/triton-cache" PYTHONPATH="$repo:${PYTHONPATH:-}" \
    PYTHONDONTWRITEBYTECODE=1 "$@"
}
link() { as_user bash -c "${GPUDOCTOR_ENV:-true}; cc '$work/launcher.c' -O3 -shared -fPIC -Wno-psabi -o '$work/build/launcher.so' -lcuda -L'$work/drv'"; }

echo "## 1. the launcher link, as Triton would run it (-lcuda -L$work/drv), as user nobody"
link; echo "exit $?"
echo "## 2. a real Triton kernel, as user nobody"
as_user "$py" "$work/kernel.py" 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
echo "## 3. gpudoctor check"
as_user "$py" -m gpudoctor check --only libcuda-unversioned-missing --only libcuda-not-in-linker-cache; echo "exit $?"
echo "## 4. gpudoctor fix --dry-run"
as_user "$py" -m gpudoctor fix --dry-run; echo "exit $?"
echo "## 5. gpudoctor fix (user-local, no root)"
as_user "$py" -m gpudoctor fix; echo "exit $?"
echo "## 6. gpudoctor env"
as_user "$py" -m gpudoctor env; echo "exit $?"
export GPUDOCTOR_ENV="eval \"\$($py -m gpudoctor env)\""
echo "## 7. the same launcher link after eval \"\$(gpudoctor env)\""
link; echo "exit $?"
echo "## 8. the same Triton kernel after eval \"\$(gpudoctor env)\", cold cache"
rm -rf "$work/home/triton-cache"
as_user bash -c "$GPUDOCTOR_ENV; '$py' '$work/kernel.py'" 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
echo "## 9. gpudoctor check after the fix"
as_user bash -c "$GPUDOCTOR_ENV; '$py' -m gpudoctor check --only libcuda-unversioned-missing"; echo "exit $?"
echo "## 10. gpudoctor fix --undo"
as_user "$py" -m gpudoctor fix --undo; echo "exit $?"
find "$work/home" -maxdepth 4 | sort
