"""cuda/request.py on its own: the GPUs a build is meant for, from a list
of capabilities, a nixpkgs config file (evaluated by nix-instantiate) or
`--gpu`; what CUDA does not know is a one-line usage error."""

from __future__ import annotations

import pytest

from closure_audit.cuda.request import config_file, from_nix_config, make_request, parse_gpus
from closure_audit.errors import UsageError
from contract_eval import needs_nix_instantiate


def test_a_request_keeps_what_was_written_and_its_gpus_without_variants():
    r = make_request([" 9.0a", "8.6", "", "9.0", "8.6", "10.0f"], False, "--capabilities")
    assert r.capabilities == ("9.0a", "8.6", "9.0", "10.0f") and not r.forward_compat
    assert r.devices == [(8, 6), (9, 0), (10, 0)] and r.source == "--capabilities"


@pytest.mark.parametrize("capabilities, words", [
    ([], "no CUDA capability given"), (["", " "], "no CUDA capability given"),
    (["sm_86"], "not a CUDA capability"), (["4.2"], "4.2 is not a CUDA capability (known: "),
    (["8.6a"], "8.6 has no 'a' variant"),
])
def test_what_cuda_does_not_know(capabilities, words):
    with pytest.raises(UsageError, match="^policy.toml: ") as e:
        make_request(capabilities, True, "policy.toml")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_gpus_as_capabilities_or_sm_names():
    assert parse_gpus("8.9, sm_90,8.9,sm_100") == [(8, 9), (9, 0), (10, 0)]
    for bad in ("sm_86a", "8", "4.2", "", "ampere"):
        with pytest.raises(UsageError, match="--gpu: .* is not a GPU's CUDA capability"):
            parse_gpus(bad)


def test_the_config_nixpkgs_reads_first(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".nixpkgs").mkdir(parents=True)
    (home / ".nixpkgs/config.nix").write_text("{ }")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NIXPKGS_CONFIG", raising=False)
    assert config_file() == str(home / ".nixpkgs/config.nix")
    (home / ".config/nixpkgs").mkdir(parents=True)
    (home / ".config/nixpkgs/config.nix").write_text("{ }")
    assert config_file() == str(home / ".config/nixpkgs/config.nix")
    monkeypatch.setenv("NIXPKGS_CONFIG", str(tmp_path / "mine.nix"))
    (tmp_path / "mine.nix").write_text("{ }")
    assert config_file() == str(tmp_path / "mine.nix")
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    monkeypatch.delenv("NIXPKGS_CONFIG")
    assert config_file() is None
    with pytest.raises(UsageError, match="no nixpkgs config found"):
        from_nix_config(None)
    with pytest.raises(UsageError, match="not a file"):
        from_nix_config(str(tmp_path / "missing.nix"))


@needs_nix_instantiate
def test_a_nixpkgs_config_as_nix_evaluates_it(tmp_path):
    cfg = tmp_path / "config.nix"
    cfg.write_text('{ pkgs, ... }: { cudaSupport = true; cudaCapabilities = [ "8.6" "9.0a" ]; }')
    r = from_nix_config(str(cfg))
    assert (r.capabilities, r.forward_compat, r.source) == (("8.6", "9.0a"), True, f"nixpkgs config {cfg}")
    cfg.write_text('{ cudaCapabilities = [ "8.6" ]; cudaForwardCompat = false; }')
    assert not from_nix_config(str(cfg)).forward_compat
    for text, words in (("{ cudaSupport = true; }", "sets no cudaCapabilities"),
                        ('{ cudaCapabilities = [ "1.0" ]; }', "1.0 is not a CUDA capability"),
                        ('{ pkgs }: { cudaCapabilities = pkgs.caps; }', "depend on pkgs")):
        cfg.write_text(text)
        with pytest.raises(UsageError, match=words):
            from_nix_config(str(cfg))
