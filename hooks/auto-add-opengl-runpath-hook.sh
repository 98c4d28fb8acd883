# shellcheck shell=bash
#
# autoAddOpenGLRunpathHook: give every dynamic ELF file of every output the
# GPU driver's library directory in its RUNPATH, so that libcuda and friends
# are found on NixOS (@driverLink@/lib) without hand-written calls.
#
# Runs in postFixup, after patchelf has shrunk the runpaths. For each file:
# - the driver directory is put first, once: running the hook twice changes
#   nothing;
# - an entry pointing at a stubs directory (CUDA's lib/stubs, whose fake
#   libcuda.so would load instead of the driver) is replaced by it;
# - every other entry keeps its place;
# - 32-bit objects get /run/opengl-driver-32/lib.
#
# @driverLink@ is substituted by makeSetupHook (overlays/hooks.nix) with
# nixpkgs' addDriverRunpath.driverLink; the two directories can still be set
# per derivation (autoAddOpenGLRunpathDriverDir, ...DriverDir32).
# Static executables, archives, object files, scripts and symlinks are left
# alone. A file patchelf cannot handle fails the build, naming it; a file is
# patched as a copy and moved into place, so it is never left half-written.
#
# Opt out with dontAutoAddOpenGLRunpath=1, or nixpkgs' own switches for its
# autoAddDriverRunpath (dontUseAutoAddDriverRunpath, dontUseAutoAddOpenGLRunpath),
# which this hook may stand in for (overlays/driver-runpath.nix). Sourcing this
# file defines autoAddOpenGLRunpath and appends it to postFixupHooks, which
# nixpkgs' setup.sh declares and fixupPhase runs. It walks every output named
# by stdenv's getAllOutputNames, or where that is not defined by $outputs
# (outputs="out lib", out=/path, lib=/path). Needs bash, coreutils and
# patchelf on PATH.

autoAddOpenGLRunpathDriverDir=${autoAddOpenGLRunpathDriverDir:-@driverLink@/lib}
autoAddOpenGLRunpathDriverDir32=${autoAddOpenGLRunpathDriverDir32:-/run/opengl-driver-32/lib}

# Prints "CLASS TYPE" (32 or 64; exec or dyn) of a file that is an ELF
# executable or shared object; fails for anything else (archives, object
# files, scripts). Reads 18 bytes: no `file` needed.
_autoAddOpenGLRunpathElfInfo() {
  local header
  header=$(od -An -tx1 -N18 -- "$1" 2>/dev/null | tr -d ' \n') || return 1
  [[ ${header:0:8} == 7f454c46 ]] || return 1
  local class=${header:8:2} data=${header:10:2} type
  if [[ $data == 01 ]]; then type=${header:32:2}${header:34:2}; else type=${header:34:2}${header:32:2}; fi
  case $type in
    0200) type=exec ;;
    0300) type=dyn ;;
    *) return 1 ;;
  esac
  case $class in
    01) echo "32 $type" ;;
    02) echo "64 $type" ;;
    *) return 1 ;;
  esac
}

# The new RUNPATH for an old one: driver directory first, stubs entries dropped
# in its favour, duplicates removed, everything else in order.
_autoAddOpenGLRunpathCompose() {
  local old=$1 driver=$2 entry result=$2
  local -a entries=()
  IFS=: read -r -a entries <<<"$old"
  for entry in "${entries[@]}"; do
    [[ -n $entry ]] || continue
    case "/$entry/" in
      */stubs/*) continue ;;
    esac
    [[ $entry == "$driver" || $entry == "${driver%/}" ]] && continue
    case ":$result:" in
      *":$entry:"*) continue ;;
    esac
    result+=":$entry"
  done
  printf '%s' "$result"
}

_autoAddOpenGLRunpathFile() {
  local file=$1 info class type driver old new tmp mode
  info=$(_autoAddOpenGLRunpathElfInfo "$file") || return 0
  read -r class type <<<"$info"
  if ! old=$(patchelf --print-rpath "$file" 2>/dev/null); then
    # An executable without a dynamic section is static; a shared object
    # always has one, so patchelf failing on it is an error.
    [[ $type == exec ]] && ! patchelf --print-interpreter "$file" >/dev/null 2>&1 && return 0
    echo "autoAddOpenGLRunpath: patchelf cannot read the runpath of $file" >&2
    return 1
  fi
  if [[ $class == 32 ]]; then driver=$autoAddOpenGLRunpathDriverDir32; else driver=$autoAddOpenGLRunpathDriverDir; fi
  new=$(_autoAddOpenGLRunpathCompose "$old" "$driver")
  [[ $new == "$old" ]] && return 0
  tmp=$(mktemp "$(dirname -- "$file")/.autoAddOpenGLRunpath.XXXXXX") || return 1
  mode=$(stat -c %a -- "$file")
  if ! cp -- "$file" "$tmp" || ! chmod u+w -- "$tmp" || ! patchelf --set-rpath "$new" "$tmp"; then
    rm -f -- "$tmp"
    echo "autoAddOpenGLRunpath: patchelf failed on $file" >&2
    return 1
  fi
  chmod "$mode" -- "$tmp" && mv -f -- "$tmp" "$file"
}

autoAddOpenGLRunpath() {
  if [[ -n ${dontAutoAddOpenGLRunpath-}${dontUseAutoAddDriverRunpath-}${dontUseAutoAddOpenGLRunpath-} ]]; then
    return 0
  fi
  local output dir file
  # stdenv's getAllOutputNames reads __structuredAttrs' associative array too.
  for output in $(getAllOutputNames 2>/dev/null || echo "${outputs:-out}"); do
    dir=${!output-}
    [[ -n $dir && -d $dir ]] || continue
    while IFS= read -r -d '' file; do
      _autoAddOpenGLRunpathFile "$file" || return 1
    done < <(find "$dir" -type f -print0)
  done
}

# After fixup, and so after runpath shrinking.
postFixupHooks+=(autoAddOpenGLRunpath)
