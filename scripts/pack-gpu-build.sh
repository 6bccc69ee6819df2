#!/usr/bin/env bash
# Packs a build for a GPU machine that has a CUDA driver and runtime but not this machine's Debian
# libraries: the programs in <build>/bin (gpu_tests included) plus every shared library they load
# that a base system does not provide, and a run script that puts those libraries first.
#
#   scripts/pack-gpu-build.sh [--with-cudart] [--with-cuda-libs] [--with-mpi] [--programs "a b"]
#                             <build-dir> <out-dir>
#   <out-dir>/run.sh gpu_tests            # on the GPU machine
#   <out-dir>/run.sh pretrain --help
#
# Left out (the target machine has its own, and copying them breaks them): the C runtime (libc,
# libm, libpthread, libdl, librt, ld-linux), the GCC runtime (libstdc++, libgcc_s), the CUDA
# driver and runtime (libcuda, libcudart, libnvidia-*) and the CUDA toolkit's libraries (cuBLAS,
# cuBLASLt — 540 MB —, NCCL, cuDNN, NVRTC, ...). The target's libstdc++ must then be at least as
# new as the one this build used (GCC 12: GLIBCXX_3.4.30), and its CUDA 13 toolkit provides the
# rest. --with-cudart packs the CUDA runtime too, for a target whose toolkit is older than this
# build's (its driver must still be new enough for this runtime); --with-cuda-libs packs the
# toolkit's libraries, for a target without a toolkit. --programs packs only the named programs.
# --with-mpi packs Open MPI's launcher (mpirun, orted), its run-time plugins and PMIx's, their
# libraries and help texts (about 6 MB compressed), and <out-dir>/mpi/env.sh, which a shell on the
# target sources to run multi-rank jobs with them (one node; the target needs no Open MPI).
set -euo pipefail

with_cudart=0
with_cuda_libs=0
with_mpi=0
only_programs=""
while [[ ${1:-} == --* ]]; do
  case $1 in
    --with-cudart) with_cudart=1 ;;
    --with-cuda-libs) with_cuda_libs=1 ;;
    --with-mpi) with_mpi=1 ;;
    --programs) only_programs=" ${2:-} "; shift ;;
    *) echo "pack-gpu-build: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $# -ne 2 ]]; then
  echo "usage: $0 [--with-cudart] [--with-cuda-libs] [--with-mpi] [--programs \"a b\"] <build-dir> <out-dir>" >&2
  exit 2
fi
build=$1
out=$2
if [[ ! -d $build/bin ]]; then
  echo "pack-gpu-build: $build/bin: no such folder (build first)" >&2
  exit 1
fi

mkdir -p "$out/bin" "$out/lib"

# Libraries the target provides itself, by file name.
is_base_library() {
  if [[ $with_cudart == 1 && $1 == libcudart.so* ]]; then return 1; fi
  if [[ $with_cuda_libs == 0 ]]; then
    case $1 in
      libcublas*.so* | libnccl.so* | libcudnn*.so* | libnvrtc*.so* | libnvJitLink.so* | \
        libcurand.so* | libcufft*.so* | libcusparse*.so* | libcusolver*.so*)
        return 0 ;;
    esac
  fi
  case $1 in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux*.so* | \
      libstdc++.so* | libgcc_s.so* | libcuda.so* | libcudart.so* | libnvidia-*.so* | \
      linux-vdso.so*)
      return 0 ;;
  esac
  return 1
}

programs=()
for path in "$build"/bin/*; do
  [[ -f $path && -x $path ]] || continue
  [[ -z $only_programs || $only_programs == *" $(basename "$path") "* ]] || continue
  # Executables only (ELF), not scripts.
  [[ $(head -c 4 "$path" | od -An -c | tr -d ' ') == 177ELF ]] || continue
  cp -p "$path" "$out/bin/"
  programs+=("$path")
done
if [[ ${#programs[@]} -eq 0 ]]; then
  echo "pack-gpu-build: no programs in $build/bin" >&2
  exit 1
fi

# Copies the libraries `ldd` lists for one ELF file into $out/lib (ldd lists the whole closure, so
# one pass per file is enough).
declare -A packed=()
pack_libraries_of() {  # elf-file
  while read -r name arrow resolved _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $resolved == "not" ]]; then
      echo "pack-gpu-build: $1 needs $name, which ldd cannot find here" >&2
      exit 1
    fi
    is_base_library "$name" && continue
    [[ -n ${packed[$name]:-} ]] && continue
    cp -L "$resolved" "$out/lib/$name"
    packed[$name]=1
  done < <(ldd "$1")
}
for program in "${programs[@]}"; do
  pack_libraries_of "$program"
done

# Open MPI 4 (Debian's layout): mpirun/orted, the component folder (pkglibdir), PMIx's components
# (next to libpmix, kept in PMIx's own layout under mpi/pmix) and both help-text folders; env.sh
# points Open MPI and PMIx at them.
pack_mpi() {
  local mpirun pkglib pkgdata pmix_lib plugin
  mpirun=$(command -v mpirun) || { echo "pack-gpu-build: --with-mpi: no mpirun here" >&2; exit 1; }
  mpirun=$(readlink -f "$mpirun")
  pkglib=$(ompi_info --path pkglibdir | awk '{print $2}')
  pkgdata=$(ompi_info --path pkgdatadir | awk '{print $2}')
  mkdir -p "$out/mpi/bin" "$out/mpi/lib/openmpi" "$out/mpi/pmix/lib/pmix" "$out/mpi/share"
  cp -L "$mpirun" "$out/mpi/bin/mpirun"
  cp -L "$(dirname "$mpirun")/orted" "$out/mpi/bin/orted"
  cp -L "$pkglib"/*.so "$out/mpi/lib/openmpi/"
  cp -rL "$pkgdata" "$out/mpi/share/openmpi"
  pmix_lib=$(ldd "$pkglib/mca_pmix_ext3x.so" 2> /dev/null | awk '$1 ~ /^libpmix/ {print $3}')
  if [[ -n $pmix_lib ]]; then
    pmix_lib=$(dirname "$(readlink -f "$pmix_lib")")
    cp -L "$pmix_lib"/pmix/*.so "$out/mpi/pmix/lib/pmix/"
    [[ ! -d $pmix_lib/../share/pmix ]] || cp -rL "$pmix_lib/../share" "$out/mpi/pmix/share"
  fi
  for plugin in "$out/mpi/bin/mpirun" "$out/mpi/bin/orted" "$out"/mpi/lib/openmpi/*.so \
    "$out"/mpi/pmix/lib/pmix/*.so; do
    pack_libraries_of "$plugin"
  done
  cat > "$out/mpi/env.sh" <<'ENV'
# Sourced on the target: the packed Open MPI's mpirun first on PATH, its components, PMIx's and
# their help texts from this folder (the packed libraries are in ../lib, which run.sh and
# scripts/gpu-check.sh put on LD_LIBRARY_PATH; mpirun passes both to the ranks it starts).
mds_mpi="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$mds_mpi/bin:$PATH"
export LD_LIBRARY_PATH="$mds_mpi/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PKGLIBDIR="$mds_mpi/lib/openmpi" OPAL_PKGDATADIR="$mds_mpi/share/openmpi"
export OMPI_MCA_mca_base_component_path="$mds_mpi/lib/openmpi"
# PMIx finds its components under $PMIX_PREFIX/lib/pmix.
export PMIX_PREFIX="$mds_mpi/pmix" PMIX_MCA_mca_base_component_path="$mds_mpi/pmix/lib/pmix"
# One node, often a container: shared memory without CMA, which ptrace restrictions block.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
ENV
}
[[ $with_mpi == 0 ]] || pack_mpi

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs one packed program with the packed libraries first on the search path.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ $# -lt 1 ]]; then
  echo "usage: $0 <program> [args...]; programs:" >&2
  ls "$here/bin" >&2
  exit 2
fi
program=$1
shift
# The target's own CUDA runtime, where the loader would not look by itself.
cuda_lib=""
for dir in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib"; do
  if [[ -d $dir ]]; then
    cuda_lib=$dir
    break
  fi
done
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}${cuda_lib:+:$cuda_lib}"
exec "$here/bin/$program" "$@"
RUN
chmod +x "$out/run.sh"

echo "pack-gpu-build: ${#programs[@]} programs, ${#packed[@]} libraries -> $out"
