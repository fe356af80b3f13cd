#!/bin/sh
# Usage: cuda_kernel_images_test.sh CUOBJDUMP LIBRARY "ARCH;ARCH;..."
# The library carries the kernel images the build promises (docs/cuda.md, "Build and loading"):
# machine code for every listed real architecture and PTX for every virtual one, so a GPU of
# each generation finds an image instead of failing with cudaErrorNoKernelImageForDevice.
set -u
cuobjdump=$1 library=$2 archs=$3
elves=$("$cuobjdump" --list-elf "$library" 2>&1) || { echo "cuobjdump --list-elf failed: $elves"; exit 1; }
ptx=$("$cuobjdump" --list-ptx "$library" 2>&1) || { echo "cuobjdump --list-ptx failed: $ptx"; exit 1; }
status=0
for arch in $(echo "$archs" | tr ';' ' '); do
  number=${arch%-real}
  number=${number%-virtual}
  case $arch in
    *-virtual) want_elf=0 want_ptx=1 ;;
    *-real) want_elf=1 want_ptx=0 ;;
    *) want_elf=1 want_ptx=1 ;;
  esac
  if [ $want_elf = 1 ] && ! echo "$elves" | grep -q "sm_${number}\b"; then
    echo "FAIL: no sm_${number} machine code in $library"; status=1
  fi
  if [ $want_ptx = 1 ] && ! echo "$ptx" | grep -q "sm_${number}\b"; then
    echo "FAIL: no compute_${number} PTX in $library"; status=1
  fi
done
# The default list must reach back to Ampere (sm_80): the oldest GPU generation collx supports.
if ! echo "$elves" | grep -q "sm_80\b" && ! echo "$ptx" | grep -q "sm_80\b"; then
  echo "FAIL: $library has no image an sm_80 (A100) GPU can load"; status=1
fi
[ $status = 0 ] && echo "kernel images for: $(echo "$elves" | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')+ PTX $(echo "$ptx" | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')"
exit $status
