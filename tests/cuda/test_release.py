"""cuda/release.py on its own: the CUDA release a target needs, told by
the names its objects need, its CUDA libraries' file names and store
paths, its wheels' dist-info names and METADATA, and torch/version.py."""

from __future__ import annotations

import pytest

from closure_audit.cuda.release import Need, from_file, from_names, from_packages, highest, torch_version


def test_names_tell_a_major_or_an_exact_release():
    needs = from_names([("/t/_C.so", "libcudart.so.13", "DT_NEEDED"), ("/t/libx.so", "libnvrtc.so.12", "dlopen"),
                        ("/t/libcudart.so.12.9.79", "libcudart.so.12.9.79", "SONAME"),
                        ("/t/a.so", "libnvrtc-builtins.so.13.0", "dlopen"), ("/t/b.so", "libcufft.so.12", "DT_NEEDED"),
                        ("/t/c.so", "libz.so.1", "DT_NEEDED")])
    assert [(n.label, n.source, n.file) for n in needs] == [
        ("13.x", "DT_NEEDED libcudart.so.13", "/t/_C.so"), ("12.x", "dlopen libnvrtc.so.12", "/t/libx.so"),
        ("12.9", "SONAME libcudart.so.12.9.79", "/t/libcudart.so.12.9.79"),
        ("13.0", "dlopen libnvrtc-builtins.so.13.0", "/t/a.so")]


@pytest.mark.parametrize("path, store, expected", [
    ("/v/nvidia/cu13/lib/libcudart.so.13.0.96", None, ((13, 0), True, "file libcudart.so.13.0.96")),
    ("/nix/store/h-cuda13.0-libcublas-13.1.0.3-lib/lib/libcublas.so.13", "cuda13.0-libcublas-13.1.0.3-lib",
     ((13, 0), True, "store path cuda13.0-libcublas-13.1.0.3-lib")),
    ("/nix/store/h-cuda_cudart-12.9.79-lib/lib/libcudart.so.12", "cuda_cudart-12.9.79-lib",
     ((12, 9), True, "store path cuda_cudart-12.9.79-lib")),
    ("/nix/store/h-libcublas-12.9.1.4-lib/lib/libcublas.so.12", "libcublas-12.9.1.4-lib", None),  # its own number
    ("/nix/store/h-cuda13.0-libcufft-12.0.0-lib/lib/libcufft.so.12", "cuda13.0-libcufft-12.0.0-lib", None),
])
def test_a_library_file_or_the_store_path_it_lies_in(path, store, expected):
    need = from_file(path, store)
    assert (None if need is None else (need.release, need.exact, need.source)) == expected


def test_wheels_metadata_and_torch_version_py(tmp_path):
    site = tmp_path / "site-packages"
    (site / "nvidia_cuda_runtime-13.0.96.dist-info").mkdir(parents=True)
    (site / "nvidia_cudnn_cu12-9.28.0.42.dist-info").mkdir()
    torch_info = site / "torch-2.9.1+cu128.dist-info"
    torch_info.mkdir()
    (torch_info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\n"
                                         "Requires-Dist: nvidia-cublas-cu12==12.8.4.1; platform_system == 'Linux'\n"
                                         "Requires-Dist: numpy\n\nRequires-Dist: nvidia-nvjitlink==99.0 in the body\n")
    (site / "torch").mkdir()
    (site / "torch/version.py").write_text("__version__ = '2.9.1+cu128'\ncuda: Optional[str] = '12.8'\n")
    names = sorted(p.name for p in site.iterdir())
    needs = from_packages(str(site), names)
    assert sorted((n.label, n.source) for n in needs) == sorted([
        ("13.0", "wheel nvidia_cuda_runtime-13.0.96.dist-info"), ("12.x", "wheel nvidia_cudnn_cu12-9.28.0.42.dist-info"),
        ("12.x", "Requires-Dist: nvidia-cublas-cu12==12.8.4.1; platform_system == 'Linux'"),
        ("12.8", "cuda: Optional[str] = '12.8'")])
    assert torch_version(names) == "2.9.1"
    assert highest(needs).label == "13.0" and highest([]) is None


def test_of_equal_releases_the_exact_one_is_judged():
    loose, exact = Need((13, 0), False, "a", "/a"), Need((13, 0), True, "b", "/b")
    assert highest([loose, exact]) is exact and highest([exact, loose]) is exact
    assert highest([Need((12, 9), True, "c", "/c"), loose]) is loose
    assert exact.to_json() == {"release": "13.0", "source": "b", "file": "/b"}


def test_unreadable_metadata_tells_nothing(tmp_path):
    info = tmp_path / "nvidia_cublas_cu12-x.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(b"\xff\xfe\x00Requires-Dist: \n")
    assert from_packages(str(tmp_path), [info.name, "torch"]) == []
