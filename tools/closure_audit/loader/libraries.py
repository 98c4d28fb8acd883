"""Libraries the loader model and the policy treat as families, by name."""

# glibc's own libraries: a Nix process always has them loaded from its glibc.
GLIBC_FAMILY = (
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libutil.so.1", "libresolv.so.2", "libanl.so.1", "libmvec.so.1",
    "libBrokenLocale.so.1", "libthread_db.so.1", "libnss_*.so.2",
    "ld-linux*.so.*", "ld64.so.*", "ld.so.1",
)
# The C runtime family a tree may take from the host.
C_RUNTIME_FAMILY = GLIBC_FAMILY + ("libstdc++.so.6", "libgcc_s.so.1")
DRIVER_LIBRARIES = (
    "libcuda.so*", "libnvidia-*.so*", "libnvcuvid.so*", "libnvidia-ml.so*", "libcudadebugger.so*",
)
DEFAULT_DRIVER_DIRS = ("/run/opengl-driver/lib",)
