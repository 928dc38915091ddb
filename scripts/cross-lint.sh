#!/usr/bin/env bash
# Cross-target clippy (`npm run test:platforms` runs it): the crate is checked, with
# warnings as errors, for x86_64-apple-darwin, aarch64-apple-darwin and x86_64-pc-windows-msvc
# as well as for this machine. ring's C code needs a C compiler for each target: zig (PyPI
# `ziglang`) plays it, installed into a venv under the cache folder the first time. Nothing is
# linked, so no Apple SDK or MSVC is needed.
#
#   PO_SANDBOX_CROSS_CACHE   where the zig venv and the compiler wrappers live
#                            (default: ${XDG_CACHE_HOME:-$HOME/.cache}/po-sandbox-cross)
#   PO_SANDBOX_CROSS_TARGETS the targets to check (default: the three above, space-separated)
#   CARGO_TARGET_DIR         shared with the host build: each target's output goes to
#                            $CARGO_TARGET_DIR/<triple>/release, and the host build scripts and
#                            proc macros are built once for all three.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=${PO_SANDBOX_CROSS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/po-sandbox-cross}
targets=${PO_SANDBOX_CROSS_TARGETS:-x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-msvc}

die() { echo "cross-lint: $*" >&2; exit 1; }

# shellcheck source=scripts/lib/zig-venv.sh
. scripts/lib/zig-venv.sh

# A compiler wrapper: zig cc for `zig_target`, without the arguments zig refuses (`drop` is a
# case pattern).
wrapper() {
  local file=$1 zig_target=$2 drop=$3
  cat >"$file.tmp" <<WRAP
#!/usr/bin/env bash
args=()
for a in "\$@"; do
  case "\$a" in
    $drop) ;;
    *) args+=("\$a") ;;
  esac
done
exec "$cache/venv/bin/python" -m ziglang cc -target $zig_target "\${args[@]}"
WRAP
  chmod +x "$file.tmp"
  mv "$file.tmp" "$file"
}

ensure_zig
mkdir -p "$cache/bin"
wrapper "$cache/bin/cc-x86_64-macos" x86_64-macos '--target=*|-mmacosx-version-min=*'
wrapper "$cache/bin/cc-aarch64-macos" aarch64-macos '--target=*|-mmacosx-version-min=*'
wrapper "$cache/bin/cc-x86_64-windows" x86_64-windows-gnu '--target=*|-m64|/nologo'
printf '#!/usr/bin/env bash\nexec "%s" -m ziglang lib "$@"\n' "$cache/venv/bin/python" >"$cache/bin/lib-windows"
chmod +x "$cache/bin/lib-windows"

export CC_x86_64_apple_darwin=$cache/bin/cc-x86_64-macos
export CC_aarch64_apple_darwin=$cache/bin/cc-aarch64-macos
export CC_x86_64_pc_windows_msvc=$cache/bin/cc-x86_64-windows
export AR_x86_64_pc_windows_msvc=$cache/bin/lib-windows

for t in $targets; do
  ensure_target "$t"
  printf '\n== lint: cargo clippy --release --all-targets --target %s -- -D warnings\n' "$t"
  cargo clippy --release --all-targets --target "$t" -- -D warnings
done
