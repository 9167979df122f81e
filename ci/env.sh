# Sourced by the ci/ scripts: the environment every MPI job here needs.
# Open MPI refuses root without these; more ranks than cores need oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# One BLAS thread per rank: ranks already share the cores.
export OPENBLAS_NUM_THREADS=1
# Quiet Open MPI's warnings about missing high-speed interconnects in containers.
export OMPI_MCA_btl_base_warn_component_unused=0
# Rebuilds reuse earlier compilations when ccache is installed.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
fi

# ci_stage NAME CMD...: runs CMD and prints how long it took, so a CI log
# shows where its minutes went ("ci: build 312 s").
ci_stage() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "ci: $name $((SECONDS - start)) s (exit $rc)"
  return $rc
}
