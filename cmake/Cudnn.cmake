# PPB_WITH_CUDNN: the cuda backend's fused attention (cuDNN's flash attention
# through the header-only cuDNN frontend). ON requires cudnn.h and
# cudnn_frontend.h, OFF builds without (--attention fused is refused, auto
# runs naive and says why), AUTO uses them when found. Nothing links
# libcudnn: the frontend loads libcudnn.so.9 at run time, so a binary starts
# (and the CUDA emulator runs it) without cuDNN installed.
# PPB_CUDNN_FRONTEND_INCLUDE: the frontend's headers; by default those of PyPI's
# nvidia-cudnn-frontend wheel in ci/setup-deps' virtual environment
# (<site-packages>/include).
set(PPB_VENV_PYTHON "/opt/pipebench/venv/bin/python" CACHE FILEPATH
    "Python of ci/setup-deps' virtual environment (where the cuDNN frontend's headers are)")
set(PPB_HAVE_CUDNN OFF)
if(PPB_HAVE_CUDA AND NOT PPB_WITH_CUDNN STREQUAL "OFF")
  set(frontend_hint "")
  if(EXISTS ${PPB_VENV_PYTHON})
    execute_process(
      COMMAND ${PPB_VENV_PYTHON} -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
      OUTPUT_VARIABLE site_packages OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    set(frontend_hint ${site_packages}/include)
  endif()
  find_path(PPB_CUDNN_FRONTEND_INCLUDE cudnn_frontend.h HINTS ${frontend_hint}
            DOC "The cuDNN frontend's headers (cudnn_frontend.h)")
  find_path(PPB_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} DOC "cuDNN's cudnn.h")
  # cuDNN 9's headers: the run loads libcudnn.so.9, the frontend needs its API.
  set(cudnn_major "")
  if(PPB_CUDNN_INCLUDE AND EXISTS ${PPB_CUDNN_INCLUDE}/cudnn_version.h)
    file(STRINGS ${PPB_CUDNN_INCLUDE}/cudnn_version.h major_line
         REGEX "^#define CUDNN_MAJOR [0-9]+")
    string(REGEX REPLACE "^#define CUDNN_MAJOR ([0-9]+).*" "\\1" cudnn_major "${major_line}")
  endif()
  if(PPB_CUDNN_FRONTEND_INCLUDE AND PPB_CUDNN_INCLUDE AND cudnn_major STREQUAL "9")
    set(PPB_HAVE_CUDNN ON)
  elseif(PPB_WITH_CUDNN STREQUAL "ON")
    message(FATAL_ERROR "PPB_WITH_CUDNN=ON needs cuDNN 9's cudnn.h (found: ${PPB_CUDNN_INCLUDE}, "
                        "CUDNN_MAJOR '${cudnn_major}') and cudnn_frontend.h (found: "
                        "${PPB_CUDNN_FRONTEND_INCLUDE}; ci/setup-deps installs "
                        "nvidia-cudnn-frontend, or set PPB_CUDNN_FRONTEND_INCLUDE)")
  elseif(PPB_CUDNN_INCLUDE AND NOT cudnn_major STREQUAL "9")
    message(STATUS "pipebench: ${PPB_CUDNN_INCLUDE}/cudnn.h is not cuDNN 9 "
                   "(CUDNN_MAJOR '${cudnn_major}'): no fused bf16 attention")
  endif()
elseif(PPB_WITH_CUDNN STREQUAL "ON")
  message(FATAL_ERROR "PPB_WITH_CUDNN=ON needs CUDA (PPB_WITH_CUDA)")
endif()
message(STATUS "pipebench: cuDNN fused attention ${PPB_HAVE_CUDNN}")
