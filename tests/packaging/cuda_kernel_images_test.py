#!/usr/bin/env python3
"""libcollx.so carries the CUDA kernel images the build promises (docs/cuda.md, "Build and
loading"): machine code (SASS) for every real architecture of CMAKE_CUDA_ARCHITECTURES and PTX
for every virtual one, so a GPU of each generation finds an image instead of failing with
cudaErrorNoKernelImageForDevice. Reads the .nv_fatbin section itself (no cuobjdump needed).

Usage: cuda_kernel_images_test.py OBJCOPY LIBRARY "80;86-real;89-real;90-real;..."
"""
import os
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


def images(fatbin):
    """(kind, sm) of every image in a .nv_fatbin section (a sequence of fat binaries)."""
    found = set()
    offset = 0
    while offset + 16 <= len(fatbin):
        magic, _version, header_size, body_size = struct.unpack_from("<IHHQ", fatbin, offset)
        if magic != FATBIN_MAGIC:
            offset += 8  # fat binaries are 8-byte aligned in the section
            continue
        entry, end = offset + header_size, offset + header_size + body_size
        while entry + 32 <= end:
            kind, _unused, entry_header, size = struct.unpack_from("<HHIQ", fatbin, entry)
            (arch,) = struct.unpack_from("<I", fatbin, entry + 28)
            found.add((kind, arch))
            if entry_header == 0:
                break
            entry += entry_header + size
        offset = end
    return found


def main():
    objcopy, library, archs = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        section = os.path.join(tmp, "fatbin")
        subprocess.run([objcopy, "-O", "binary", "--only-section=.nv_fatbin", library, section], check=True)
        with open(section, "rb") as f:
            found = images(f.read())
    failures = []
    for arch in filter(None, archs.split(";")):
        number = int(arch.split("-")[0])
        want_elf = not arch.endswith("-virtual")
        want_ptx = not arch.endswith("-real")
        if want_elf and (KIND_ELF, number) not in found:
            failures.append("no sm_%d machine code" % number)
        if want_ptx and (KIND_PTX, number) not in found:
            failures.append("no compute_%d PTX" % number)
    # The oldest generation collx supports is Ampere: an A100 (sm_80) must find an image.
    if not any(sm <= 80 for _kind, sm in found):
        failures.append("no image an sm_80 (A100) GPU can load")
    print("machine code: %s; PTX: %s" % (
        " ".join("sm_%d" % sm for kind, sm in sorted(found) if kind == KIND_ELF),
        " ".join("compute_%d" % sm for kind, sm in sorted(found) if kind == KIND_PTX)))
    for failure in failures:
        print("FAIL: %s in %s" % (failure, library))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
