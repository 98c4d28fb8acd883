"""The one table of CUDA libraries (lib/data/cuda-libraries.json) as
closure-audit reads it (cuda/libraries.py) and as what reads it uses it: the
loader's class of CUDA libraries, the advice, the release a name tells."""

from __future__ import annotations

import fnmatch

from closure_audit.cuda import libraries
from closure_audit.cuda.libraries import LIBRARIES, install_hint, library, wheel_for
from closure_audit.cuda.release import from_names
from closure_audit.loader.libraries import CUDA_TOOLKIT_LIBRARIES, DRIVER_LIBRARIES, OPTIONAL_LIBRARIES


def test_rows_are_well_formed_and_each_family_has_one_package():
    assert len({lib.file for lib in LIBRARIES}) == len(LIBRARIES)
    package: dict[str, tuple[str, str]] = {}
    for lib in LIBRARIES:
        assert lib.file.startswith("lib") and lib.file.endswith(".so*"), lib
        assert lib.wheel.startswith(("nvidia-", "cutensor-")), lib
        assert package.setdefault(lib.family, (lib.redist, lib.wheel)) == (lib.redist, lib.wheel), lib.family


def test_no_row_is_a_driver_library():
    for lib in LIBRARIES:
        name = lib.file.replace("*", "x")
        assert not any(fnmatch.fnmatchcase(name, d) for d in DRIVER_LIBRARIES), lib.file


def test_a_name_takes_the_first_row_that_matches():
    assert library("libcublasLt.so.13").family == "cublas"
    assert library("libcusparseLt.so.0").family == "cusparselt"
    assert library("libcusparse.so.12").family == "cusparse"
    assert library("libnvrtc-builtins.so.13.0").redist == "cuda_nvrtc"
    assert library("libcudnn_graph.so.9").wheel == "nvidia-cudnn-cuXX"
    assert library("libcuda.so.1") is None and library("libz.so.1") is None


def test_the_loader_and_the_advice_read_the_table():
    assert CUDA_TOOLKIT_LIBRARIES == tuple(lib.file for lib in LIBRARIES)
    optional = {pattern: provider for pattern, _feature, provider in OPTIONAL_LIBRARIES}
    assert optional["libcutensor*.so*"] == "the cutensor-cu13 wheel (cutensor-cu12 for CUDA 12)"
    assert install_hint("libcudnn.so.9") == ("the nvidia-cudnn-cu13 wheel (nvidia-cudnn-cu12 for CUDA 12) or the "
                                             "cudnn redistributable")
    assert install_hint("libcudss.so.0").endswith("the libcudss redistributable")


def test_release_numbered_libraries_tell_the_release():
    assert set(libraries.RELEASE_NUMBERED) == {"libcudart", "libcublas", "libcublasLt", "libnvblas", "libnvrtc",
                                                "libnvJitLink", "libcupti"}
    assert wheel_for("libcudart.so.13") == "nvidia-cuda-runtime==13.*"
    assert wheel_for("libcublasLt.so.12") == "nvidia-cublas-cu12"
    assert wheel_for("libcufft.so.12") is None  # numbered on its own
    (need,) = from_names([("f", "libnvJitLink.so.13", "DT_NEEDED")])
    assert need.release == (13, 0) and not need.exact
    assert from_names([("f", "libcufft.so.12", "DT_NEEDED")]) == []
