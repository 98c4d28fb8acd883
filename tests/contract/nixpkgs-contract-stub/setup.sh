# shellcheck shell=bash
# CONTRACT STUB, not nixpkgs: the part of nixpkgs' generic builder
# (pkgs/stdenv/generic/setup.sh) that setup hooks rely on, for store builds
# made with builtins.derivation (builder /bin/bash, this file as its first
# argument). Written from nixpkgs' semantics, not copied:
#
# - with __structuredAttrs, Nix's .attrs.sh ($NIX_ATTRS_SH_FILE) is sourced and
#   every output becomes a variable of its name (setup.sh does the same);
#   without, $outputs is a word list and each output is an environment variable;
# - getAllOutputNames: the output names either way;
# - runHook NAME runs the implicit hook (the function NAME, or the string in
#   the variable NAME) and then every entry of the array ${NAME%Hook}Hooks, in
#   order; an entry that is a function gets the arguments, anything else is
#   eval'ed (runHook, _callImplicitHook, _eval);
# - the hook arrays setup.sh declares, and only those: preFixupHooks,
#   fixupOutputHooks, preConfigureHooks, postFixupHooks, postUnpackHooks,
#   unpackCmdHooks. A hook that waits for another array to be declared never
#   registers;
# - setup hooks ($setupHooks here, nativeBuildInputs' nix-support/setup-hook
#   in nixpkgs) are sourced before any phase, in order;
# - genericBuild runs the phases: unpackPhase (one tarball, cd into its
#   single directory), installPhase (the $installPhase string), fixupPhase:
#   make every output writable, runHook preFixup, runHook fixupOutput once
#   per output with $prefix set to it, runHook postFixup.
#
# A builder runs `source setup.sh; genericBuild`.
set -eu
set -o pipefail
shopt -s nullglob

if [[ -n ${NIX_ATTRS_SH_FILE-} && -e ${NIX_ATTRS_SH_FILE} ]]; then
    # shellcheck disable=SC1090
    source "$NIX_ATTRS_SH_FILE"
    __structuredAttrs=1
    for __output in "${!outputs[@]}"; do
        export "$__output=${outputs[$__output]}"
    done
    unset __output
    export PATH
else
    __structuredAttrs=
    : "${outputs:=out}"
fi

getAllOutputNames() {
    if [[ -n $__structuredAttrs ]]; then
        echo "${!outputs[*]}"
    else
        echo "$outputs"
    fi
}

_callImplicitHook() {
    local def=$1 hookName=$2
    if declare -F "$hookName" >/dev/null; then
        "$hookName"
    elif [[ -n ${!hookName:-} ]]; then
        eval "${!hookName}"
    else
        return "$def"
    fi
}

_eval() {
    if declare -F "$1" >/dev/null 2>&1; then
        "$@"
    else
        eval "$1"
    fi
}

runHook() {
    local hookName=$1
    shift
    local hooksSlice="${hookName%Hook}Hooks[@]"
    local hook
    for hook in "_callImplicitHook 0 $hookName" ${!hooksSlice+"${!hooksSlice}"}; do
        _eval "$hook" "$@"
    done
    return 0
}

declare -a preFixupHooks fixupOutputHooks preConfigureHooks postFixupHooks postUnpackHooks unpackCmdHooks

for __hook in ${setupHooks-}; do
    # shellcheck disable=SC1090
    source "$__hook"
done
unset __hook

unpackPhase() {
    runHook preUnpack
    mkdir -p "$NIX_BUILD_TOP/source-root"
    cd "$NIX_BUILD_TOP/source-root"
    tar -xf "$src"
    local dirs=(*/)
    if ((${#dirs[@]} != 1)); then
        echo "unpackPhase: expected one directory in $src" >&2
        return 1
    fi
    cd "${dirs[0]}"
    runHook postUnpack
}

installPhase() {
    eval "${installPhase:?installPhase is not set}"
}

fixupPhase() {
    local output
    for output in $(getAllOutputNames); do
        if [[ -e ${!output} ]]; then chmod -R u+w "${!output}"; fi
    done
    runHook preFixup
    for output in $(getAllOutputNames); do
        prefix=${!output} runHook fixupOutput
    done
    runHook postFixup
}

genericBuild() {
    local phase output
    for phase in unpackPhase installPhase fixupPhase; do
        "$phase"
    done
    for output in $(getAllOutputNames); do
        mkdir -p "${!output}"
    done
}
