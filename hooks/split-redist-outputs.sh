# shellcheck shell=bash
#
# Split an NVIDIA redistributable, installed into $out, across its outputs:
#
#   stubs    anything under a stubs/ directory (lib/stubs/libcuda.so)
#   samples  anything under a samples/ or sample/ directory
#   doc      doc/, docs/, man/, share/doc/, share/man/, share/info/
#   dev      include/, headers anywhere, pkg-config and CMake files
#   static   *.a
#   lib      shared libraries and their symlinks in lib/ or lib64/
#   bin      executables and symlinks in bin/
#
# in that order of precedence; everything else (LICENSE, ...) stays in out.
# tools/redist_features/layout.py holds the same rules (the output lists in
# pkgs/cuda/outputs are made with it) and the tests check that both agree.
#
# splitRedistOutputs moves the files and then fails the build when a declared
# output is empty, when a symlink no longer resolves, or when an output holds
# an FHS path (/usr/..., opt out with allowFHSReferences=1). A file whose
# output is not declared fails the build when splitRedistStrict=1 (the output
# list was made from the archive itself); otherwise it stays in out, with a
# warning. propagateRedistOutputs then writes nix-support: dev propagates lib
# and bin, never static or stubs; out propagates dev (or lib and bin), so
# that depending on out still gives a working package without a symlink farm.
#
# Opt out with dontSplitRedistOutputs=1. Sourcing this file defines the
# functions and appends them to preFixupHooks and postFixupHooks, two of the
# arrays nixpkgs' setup.sh declares and fixupPhase runs (runHook preFixup,
# runHook postFixup): the split runs before fixup, so stripping and patching
# see the final outputs. The functions read the output names from stdenv's
# getAllOutputNames (a word list in $outputs where it is not defined) and one
# variable per output; they need bash, coreutils, findutils and grep.

# The declared output names: stdenv's getAllOutputNames (which reads the
# associative array of __structuredAttrs too), else the word list $outputs.
_redistOutputNames() {
  getAllOutputNames 2>/dev/null || echo "${outputs:-out}"
}

# Sets _redistTarget to the output a file belongs to (a variable, not
# output, so that thousands of headers cost no subshell each).
_redistOutputOf() {
  local path=$1 kind=$2 executable=$3
  local name=${path##*/} top=${path%%/*} parent=""
  [[ $path == */* ]] && parent=/${path%/*}/
  _redistTarget=out
  case $parent in */stubs/*) _redistTarget=stubs; return ;; esac
  case $parent in */samples/* | */sample/*) _redistTarget=samples; return ;; esac
  case $top in doc | docs | man) _redistTarget=doc; return ;; esac
  case $path in share/doc/* | share/man/* | share/info/*) _redistTarget=doc; return ;; esac
  [[ $top == include ]] && { _redistTarget=dev; return; }
  case $name in *.h | *.hh | *.hpp | *.hxx | *.cuh | *.inl | *.cmake) _redistTarget=dev; return ;; esac
  case $path in
    lib/pkgconfig/* | lib64/pkgconfig/* | share/pkgconfig/* | pkg-config/* | pkgconfig/* | lib/cmake/* | lib64/cmake/* | share/cmake/*)
      _redistTarget=dev
      return
      ;;
  esac
  case $name in *.a) _redistTarget=static; return ;; esac
  if [[ $top == lib || $top == lib64 ]]; then
    case $name in *.so | *.so.*) _redistTarget=lib; return ;; esac
  fi
  if [[ $top == bin ]] && [[ $kind == link || $executable == 1 ]]; then
    _redistTarget=bin
  fi
}

# Whether an output is declared; the callers set _redistNames once.
_redistDeclared() {
  [[ " $_redistNames " == *" $1 "* ]]
}

splitRedistOutputs() {
  [[ -n ${dontSplitRedistOutputs-} ]] && return 0
  local root=${out:?splitRedistOutputs: \$out is not set}
  local file rel kind target dest _redistTarget _redistNames
  local -a undeclared=() problems=()
  _redistNames=$(_redistOutputNames)
  local -A executable=()
  while IFS= read -r -d '' file; do
    executable[$file]=1
  done < <(find "$root" -type f -perm /111 -print0)
  while IFS= read -r -d '' file; do
    rel=${file#"$root"/}
    kind=file
    [[ -L $file ]] && kind=link
    _redistOutputOf "$rel" "$kind" "${executable[$file]:-0}"
    target=$_redistTarget
    [[ $target == out ]] && continue
    if ! _redistDeclared "$target"; then
      undeclared+=("$rel ($target)")
      continue
    fi
    dest=${!target}/$rel
    mkdir -p "${dest%/*}"
    mv -- "$file" "$dest"
  done < <(find "$root" -mindepth 1 \( -type f -o -type l \) -not -path "$root/nix-support/*" -print0 | sort -z)
  find "$root" -mindepth 1 -depth -type d -empty -delete

  if ((${#undeclared[@]})); then
    if [[ -n ${splitRedistStrict-} ]]; then
      problems+=("files for outputs that are not declared: ${undeclared[*]:0:5}")
    else
      echo "splitRedistOutputs: warning: kept in out, their output is not declared: ${undeclared[*]:0:5}" >&2
    fi
  fi

  local output dir
  for output in $_redistNames; do
    [[ $output == out ]] && continue
    dir=${!output-}
    if [[ -z $dir || -z $(find "$dir" -mindepth 1 -not -path "$dir/nix-support" -not -path "$dir/nix-support/*" -print -quit 2>/dev/null) ]]; then
      problems+=("declared output '$output' is empty")
    fi
  done

  local -a dirs=()
  for output in $_redistNames; do
    [[ -d ${!output-} ]] && dirs+=("${!output}")
  done
  local dangling
  dangling=$(find "${dirs[@]}" -xtype l -print 2>/dev/null | head -n 5) || true
  [[ -n $dangling ]] && problems+=("symlinks left dangling by the split: ${dangling//$'\n'/ }")
  if [[ -z ${allowFHSReferences-} ]]; then
    local fhs
    fhs=$(grep -rl --exclude=LICENSE --exclude='*.txt' -- /usr/ "${dirs[@]}" 2>/dev/null | head -n 5) || true
    [[ -n $fhs ]] && problems+=("FHS paths (/usr/...) in: ${fhs//$'\n'/ }")
  fi

  if ((${#problems[@]})); then
    local p
    for p in "${problems[@]}"; do echo "splitRedistOutputs: $p" >&2; done
    return 1
  fi
}

propagateRedistOutputs() {
  [[ -n ${dontSplitRedistOutputs-} ]] && return 0
  local output
  local _redistNames
  _redistNames=$(_redistOutputNames)
  local -a devGets=() outGets=()
  for output in lib bin; do
    _redistDeclared "$output" && devGets+=("${!output}")
  done
  if _redistDeclared dev; then
    outGets=("$dev")
    if ((${#devGets[@]})); then
      mkdir -p "$dev/nix-support"
      printf '%s ' "${devGets[@]}" >>"$dev/nix-support/propagated-build-inputs"
    fi
  else
    outGets=("${devGets[@]}")
  fi
  if ((${#outGets[@]})); then
    mkdir -p "$out/nix-support"
    printf '%s ' "${outGets[@]}" >>"$out/nix-support/propagated-build-inputs"
  fi
}

preFixupHooks+=(splitRedistOutputs)
postFixupHooks+=(propagateRedistOutputs)
