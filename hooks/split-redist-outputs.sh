# shellcheck shell=bash
#
# Split an NVIDIA redistributable, installed into $out, across its outputs:
# stubs, samples, doc, dev, static, lib, bin, by the rules of
# lib/data/redist-split-rules.txt (docs/nix/redist-features.md): the first rule
# that holds for a file names its output; everything else (LICENSE, ...)
# stays in out. makeSetupHook puts the rules' text into this file
# (substitutions.redistSplitRules, overlays/hooks.nix), and
# tools/redist_features/layout.py reads the same file to make the output
# lists in pkgs/cuda/outputs: one copy of the rules.
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

# The rules, as makeSetupHook substitutes them.
read -r -d '' _redistSplitRules <<'REDIST_SPLIT_RULES' || true
@redistSplitRules@
REDIST_SPLIT_RULES

# _redistOutputOf PATH KIND EXECUTABLE sets _redistTarget to the output a
# file belongs to (a variable, not output, so that thousands of headers cost
# no subshell each). It is made once, here, from the rules: a rule becomes
# nested case statements, one a test, so a file costs what hand-written case
# statements cost. A test's subject: dir matches /PARENT/DIRS/ with */NAME/*.
_redistCompileRules() {
  local line output rule alts test pattern body="" i
  local -a tests patterns
  local -A subject=([dir]='$parent' [top]='$top' [path]='$path' [name]='$name' [kind]='$kind')
  while read -r line; do
    [[ -z $line || $line == '#'* ]] && continue
    output=${line%%[[:space:]]*}
    read -r -a tests <<<"${line#"$output"}"
    if ((${#tests[@]} == 0)); then
      echo "split-redist-outputs: a rule without a test: $line" >&2
      return 1
    fi
    rule="_redistTarget=$output; return"
    for ((i = ${#tests[@]} - 1; i >= 0; i--)); do
      test=${tests[i]%%=*}
      if [[ -z ${subject[$test]-} ]]; then
        echo "split-redist-outputs: unknown test '$test' in the rule: $line" >&2
        return 1
      fi
      IFS=, read -r -a patterns <<<"${tests[i]#*=}"
      alts=""
      for pattern in "${patterns[@]}"; do
        [[ $test == dir ]] && pattern="*/$pattern/*"
        alts+="${alts:+ | }$pattern"
      done
      rule="case ${subject[$test]} in $alts) $rule ;; esac"
    done
    body+="$rule"$'\n'
  done <<<"$_redistSplitRules"
  eval "_redistOutputOf() {
    local path=\$1 kind=\$2 name=\${1##*/} top=\${1%%/*} parent=''
    [[ \$path == */* ]] && parent=/\${path%/*}/
    [[ \$kind == file && \$3 == 1 ]] && kind=executable
    _redistTarget=out
    $body}"
}
_redistCompileRules || return 1  # a rule it cannot read fails the build's setup

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
