#!/usr/bin/env python3
"""qmpi must not link the libraries only --backend cuda calls and whose loading costs every
process start: cuBLAS pulls in cuBLASLt, whose static initialisers took ~0.4 s of CPU per
process (each of mpirun's ranks, every `qmpi plan`), so the CUDA backend opens it on first use
(src/backend/cuda/cublas_library.h). Usage: startup_libraries.py QMPI_BINARY"""
import re
import subprocess
import sys

LAZY = ("libcublas.so", "libcublasLt.so")


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], check=True, capture_output=True, text=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def main():
    libs = needed(sys.argv[1])
    if not libs:
        sys.exit(f"startup_libraries: readelf listed no NEEDED entries for {sys.argv[1]}")
    linked = [lib for lib in libs if lib.startswith(LAZY)]
    if linked:
        sys.exit(f"startup_libraries: {sys.argv[1]} links {', '.join(linked)}; open them on first "
                 "use instead (src/backend/cuda/cublas_library.h)")
    print(f"startup_libraries: {len(libs)} NEEDED libraries, none of {', '.join(LAZY)}")


if __name__ == "__main__":
    main()
