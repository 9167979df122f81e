// The CUDA emulator as a CUDA program sees it (label emulated): this binary
// links NVIDIA's runtime and cuBLAS like any CUDA build, and ctest runs it
// with the emulator's folder first on LD_LIBRARY_PATH. Stream order and
// events, the pageable-copy rule, stream-ordered pools, device capacity,
// cuBLAS's column-major GEMMs (and the backend's row-major Blas on them),
// and the refusals a GPU would only fault on. Skips, saying why, when the
// process did not load the emulator.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cpu/kernel_math.hpp"
#include "cuda/blas.hpp"
#include "cuda/kernels.hpp"
#include "emulated_label.hpp"
#include "ppb/exec/cuda_device.hpp"

namespace ppb {
namespace {

constexpr const char* kEmulator = "pipebench CUDA emulator (CPU)";

// A host-side gate a stream waits at (cudaLaunchHostFunc), so that a test
// decides when the work behind it may run.
struct Gate {
  std::atomic<bool> open{false};
  static void wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    while (!g->open) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

class CudaEmu : public ::testing::Test {
 protected:
  void SetUp() override {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || std::string(prop.name) != kEmulator) {
      (void)cudaGetLastError();
      PPB_SKIP_UNLESS_EMULATED(
          "not running on the CUDA emulator (its folder is not first on "
          "LD_LIBRARY_PATH)");
    }
    ASSERT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (s_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(s_), cudaSuccess);
    }
  }
  cudaStream_t s_ = nullptr;
};

TEST_F(CudaEmu, CopiesAreBoundedByTheirAllocationAndMustFitTheirKind) {
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 1000), cudaSuccess);
  std::vector<char> host(2000, 7);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 1000, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 1001, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Kinds that contradict the pointers.
  EXPECT_EQ(cudaMemcpy(host.data(), d, 10, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 10, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(static_cast<char*>(d) + 900, 0, 101, s_), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  // cudaMemcpyDefault infers the direction.
  std::vector<char> back(1000, 0);
  EXPECT_EQ(cudaMemcpy(back.data(), d, 1000, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(back, std::vector<char>(1000, 7));
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);  // not device memory
  (void)cudaGetLastError();
}

TEST_F(CudaEmu, APageableSourceIsTakenAtTheCallAPinnedOneWhenTheCopyRuns) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 2 * sizeof(float)), cudaSuccess);
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, sizeof(float), cudaHostAllocDefault), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s_, &Gate::wait, &gate), cudaSuccess);
  float pageable = 1.0f;
  *pinned = 1.0f;
  ASSERT_EQ(cudaMemcpyAsync(d, &pageable, sizeof(float), cudaMemcpyHostToDevice, s_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d + 1, pinned, sizeof(float), cudaMemcpyHostToDevice, s_), cudaSuccess);
  pageable = 2.0f;  // after the call: the staged value stands
  *pinned = 2.0f;   // before the copy ran: the copy reads this
  EXPECT_EQ(cudaStreamQuery(s_), cudaErrorNotReady);
  gate.open = true;
  float out[2] = {};
  ASSERT_EQ(cudaMemcpyAsync(out, d, sizeof out, cudaMemcpyDeviceToHost, s_), cudaSuccess);
  // Into pageable memory the call returned once the copy was done.
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST_F(CudaEmu, AnEventOrdersAnotherStreamAndTimesTheWorkBetweenTwo) {
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  cudaEvent_t untimed = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, sizeof(int)), cudaSuccess);
  Gate gate;
  ASSERT_EQ(cudaEventRecord(start, s_), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s_, &Gate::wait, &gate), cudaSuccess);
  const int value = 42;
  ASSERT_EQ(cudaMemcpyAsync(d, &value, sizeof value, cudaMemcpyHostToDevice, s_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, s_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(other, end, 0), cudaSuccess);
  int out = 0;
  int* pinned_out = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned_out, sizeof(int), cudaHostAllocDefault), cudaSuccess);
  *pinned_out = 0;
  ASSERT_EQ(cudaMemcpyAsync(pinned_out, d, sizeof(int), cudaMemcpyDeviceToHost, other),
            cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(other), cudaErrorNotReady);  // held by the event
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  // The gate opens 30 ms after `start` completed: the two events are apart
  // by at least that, however late the stream's thread ran.
  while (cudaEventQuery(start) == cudaErrorNotReady) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  gate.open = true;
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  out = *pinned_out;
  EXPECT_EQ(out, 42);  // the copy on `other` ran after the one it waited for
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 30.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
  for (cudaEvent_t e : {start, end, untimed}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned_out), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

uint64_t pool_attr(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t v = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, attr, &v), cudaSuccess);
  return v;
}

TEST_F(CudaEmu, APoolCountsItsUseInStreamOrder) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&a, 1000, pool, s_), cudaSuccess);
  ASSERT_EQ(cudaMallocFromPoolAsync(&b, 3000, pool, s_), cudaSuccess);
  EXPECT_EQ(pool_attr(pool, cudaMemPoolAttrUsedMemHigh), 4000u);
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s_, &Gate::wait, &gate), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(a, s_), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(b, s_), cudaSuccess);
  EXPECT_EQ(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), 4000u);  // the frees wait
  gate.open = true;
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_EQ(pool_attr(pool, cudaMemPoolAttrUsedMemCurrent), 0u);
  EXPECT_EQ(pool_attr(pool, cudaMemPoolAttrUsedMemHigh), 4000u);
  uint64_t zero = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
  EXPECT_EQ(pool_attr(pool, cudaMemPoolAttrUsedMemHigh), 0u);  // restarts at the current use
  uint64_t nonzero = 5;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &nonzero),
            cudaErrorInvalidValue);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
}

TEST_F(CudaEmu, DeviceMemoryRunsOutAtTheDevicesCapacity) {
  // PPB_CUDAEMU_MEMORY sets the capacity (emulated_run_cuda_oom uses it).
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  size_t free_bytes = 0;
  size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  EXPECT_EQ(total, prop.totalGlobalMem);
  void* big = nullptr;
  EXPECT_EQ(cudaMalloc(&big, free_bytes + 1), cudaErrorMemoryAllocation);
  (void)cudaGetLastError();
  ASSERT_EQ(cudaMalloc(&big, size_t{100} << 20), cudaSuccess);
  size_t after = 0;
  ASSERT_EQ(cudaMemGetInfo(&after, &total), cudaSuccess);
  EXPECT_EQ(free_bytes - after, size_t{100} << 20);
  EXPECT_EQ(cudaFree(big), cudaSuccess);
}

// C (column-major, m x n, ldc) = alpha op(A) op(B) + beta C, in double.
std::vector<double> reference_gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                                   const std::vector<float>& a, int lda,
                                   const std::vector<float>& b, int ldb, float beta,
                                   const std::vector<float>& c, int ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const double x = ta ? a[size_t(i) * lda + p] : a[size_t(p) * lda + i];
        const double y = tb ? b[size_t(p) * ldb + j] : b[size_t(j) * ldb + p];
        sum += x * y;
      }
      out[size_t(j) * ldc + i] = alpha * sum + beta * c[size_t(j) * ldc + i];
    }
  }
  return out;
}

template <class T>
T* upload(const std::vector<float>& v) {
  std::vector<T> host(v.size());
  for (size_t i = 0; i < v.size(); ++i) host[i] = static_cast<T>(v[i]);
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return d;
}

std::vector<float> pattern(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 13) % 17) / 8 - 1;
  return v;
}

TEST_F(CudaEmu, CublasGemmExIsColumnMajorWithEachTransposeAndLeadingDimension) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(h, s_), CUBLAS_STATUS_SUCCESS);
  const int m = 5;
  const int n = 3;
  const int k = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool bf16 : {false, true}) {
        // Padded leading dimensions: 2 more than the stored rows.
        const int lda = (ta ? k : m) + 2;
        const int ldb = (tb ? n : k) + 2;
        const int ldc = m + 1;
        const auto a = pattern(size_t(lda) * (ta ? m : k), 1);
        const auto b = pattern(size_t(ldb) * (tb ? k : n), 2);
        const auto c = pattern(size_t(ldc) * n, 3);
        const float alpha = 0.5f;
        const float beta = -2.0f;
        const auto want = reference_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
        void* da = bf16 ? static_cast<void*>(upload<__nv_bfloat16>(a)) : upload<float>(a);
        void* db = bf16 ? static_cast<void*>(upload<__nv_bfloat16>(b)) : upload<float>(b);
        float* dc = upload<float>(c);
        ASSERT_EQ(cublasGemmEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m,
                               n, k, &alpha, da, t, lda, db, t, ldb, &beta, dc, CUDA_R_32F, ldc,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  CUBLAS_STATUS_SUCCESS);
        std::vector<float> got(c.size());
        ASSERT_EQ(cudaMemcpyAsync(got.data(), dc, got.size() * 4, cudaMemcpyDeviceToHost, s_),
                  cudaSuccess);
        for (size_t i = 0; i < got.size(); ++i) {
          // The pattern's values are exact in bf16; the padding row is untouched.
          EXPECT_NEAR(got[i], want[i], 1e-5) << "ta " << ta << " tb " << tb << " at " << i;
        }
        for (void* p : {da, db, static_cast<void*>(dc)}) EXPECT_EQ(cudaFree(p), cudaSuccess);
      }
    }
  }
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST_F(CudaEmu, CublasRefusesOperandsPastTheirAllocationAndUnsupportedTypes) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f;
  float* a = upload<float>(pattern(4 * 4, 1));
  float* small = upload<float>(pattern(4 * 3, 2));  // one column short of 4 x 4
  float* c = upload<float>(pattern(4 * 4, 3));
  EXPECT_EQ(
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, CUDA_R_32F, 4, small, CUDA_R_32F,
                   4, &one, c, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 3, 4, &one, a, CUDA_R_32F, 3, a, CUDA_R_32F, 4,
                   &one, c, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_INVALID_VALUE);  // lda 3 < m 4
  EXPECT_EQ(
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 4, a, CUDA_R_32F, 4,
                   &one, c, CUDA_R_16BF, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_SUPPORTED);  // fp32 inputs into bf16
  // Batched: the third matrix of A runs past its allocation.
  EXPECT_EQ(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 2,
                                       8, a, CUDA_R_32F, 2, 0, &one, c, CUDA_R_32F, 2, 4, 3,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  for (float* p : {a, small, c}) EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST_F(CudaEmu, TheBackendsRowMajorGemmIsTheRowMajorProduct) {
  // cuda::Blas swaps operands for cuBLAS's column-major view; check it
  // against the row-major definition (a row-major X is a column-major X^T).
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 1 << 20), cudaSuccess);
  {
    cuda::Blas blas(s_, ws, 1 << 20);
    const int m = 3;
    const int n = 4;
    const int k = 5;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const auto a = pattern(size_t(m) * k, 4);  // A [m,k] or, transposed, [k,m]
        const auto b = pattern(size_t(k) * n, 5);
        const std::vector<float> c(size_t(m) * n, 0.0f);
        const int lda = ta ? m : k;
        const int ldb = tb ? k : n;
        // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
        const auto want = reference_gemm(tb, ta, n, m, k, 1.0f, b, ldb, a, lda, 0.0f, c, n);
        float* da = upload<float>(a);
        float* db = upload<float>(b);
        float* dc = upload<float>(c);
        blas.gemm(ta, tb, m, n, k, 1.0f, {da, lda}, {db, ldb}, cuda::Dtype::kFp32, 0.0f, dc, n,
                  cuda::Dtype::kFp32);
        std::vector<float> got(c.size());
        ASSERT_EQ(cudaMemcpyAsync(got.data(), dc, got.size() * 4, cudaMemcpyDeviceToHost, s_),
                  cudaSuccess);
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            double direct = 0;  // straight from the row-major definition
            for (int p = 0; p < k; ++p) {
              direct += double(ta ? a[size_t(p) * m + i] : a[size_t(i) * k + p]) *
                        (tb ? b[size_t(j) * k + p] : b[size_t(p) * n + j]);
            }
            EXPECT_NEAR(got[size_t(i) * n + j], direct, 1e-5);
            EXPECT_NEAR(want[size_t(i) * n + j], direct, 1e-9);
          }
        }
        for (float* p : {da, db, dc}) EXPECT_EQ(cudaFree(p), cudaSuccess);
      }
    }
  }
  EXPECT_EQ(cudaFree(ws), cudaSuccess);
}

// The storage dtype's values of n elements at d, as floats.
std::vector<float> download(const void* d, cuda::Dtype dt, size_t n, cudaStream_t s) {
  std::vector<float> out(n);
  if (dt == cuda::Dtype::kFp32) {
    EXPECT_EQ(cudaMemcpyAsync(out.data(), d, n * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
  } else {
    std::vector<__nv_bfloat16> raw(n);
    EXPECT_EQ(cudaMemcpyAsync(raw.data(), d, n * 2, cudaMemcpyDeviceToHost, s), cudaSuccess);
    for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(raw[i]);
  }
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return out;
}

void* upload_as(cuda::Dtype dt, const std::vector<float>& v) {
  return dt == cuda::Dtype::kFp32 ? static_cast<void*>(upload<float>(v))
                                  : static_cast<void*>(upload<__nv_bfloat16>(v));
}

// The backend's fused GEMMs (cuda::Blas::gemm_epilogue) through the
// emulated cuBLASLt, against the row-major definitions in double: the bias
// with a residual as C, bias + GeLU keeping the pre-activation (aux), and
// the bias gradient (column sums of B) beside an accumulating weight
// gradient, in fp32 and bf16 (the pattern's values are exact in bf16; bf16
// results are rounded once).
TEST_F(CudaEmu, CublasLtEpiloguesComputeTheirRowMajorDefinitions) {
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 1 << 20), cudaSuccess);
  {
    cuda::Blas blas(s_, ws, 1 << 20);
    const int t = 6;
    const int in = 5;
    const int out = 16;  // the aux leading dimension: a multiple of 8
    for (const cuda::Dtype dt : {cuda::Dtype::kFp32, cuda::Dtype::kBf16}) {
      const double tol = dt == cuda::Dtype::kFp32 ? 1e-5 : 1e-2;
      const auto x = pattern(size_t(t) * in, 1);
      const auto w = pattern(size_t(in) * out, 2);
      const auto bias = pattern(out, 3);
      const auto add = pattern(size_t(t) * out, 4);
      std::vector<double> xw(size_t(t) * out, 0.0);  // x w, row-major
      for (int r = 0; r < t; ++r) {
        for (int c = 0; c < out; ++c) {
          for (int p = 0; p < in; ++p)
            xw[size_t(r) * out + c] += double(x[r * in + p]) * w[p * out + c];
        }
      }
      void* dx = upload_as(dt, x);
      void* dw = upload_as(dt, w);
      void* dbias = upload_as(dt, bias);
      void* dadd = upload_as(dt, add);
      void* dy = upload_as(dt, std::vector<float>(size_t(t) * out, 0.0f));
      void* daux = upload_as(dt, std::vector<float>(size_t(t) * out, 0.0f));
      // y = x w + bias + add
      ASSERT_TRUE(blas.gemm_epilogue(false, false, t, out, in, {dx, in}, {dw, out}, dt, 1.0f, dadd,
                                     dy, out, dt, {cuda::Epilogue::kBias, dbias, nullptr}));
      std::vector<float> y = download(dy, dt, xw.size(), s_);
      for (size_t i = 0; i < y.size(); ++i) {
        EXPECT_NEAR(y[i], xw[i] + bias[i % out] + add[i], tol * (1 + std::fabs(xw[i])));
      }
      // aux = x w + bias, y = gelu(aux)
      ASSERT_TRUE(blas.gemm_epilogue(false, false, t, out, in, {dx, in}, {dw, out}, dt, 0.0f, dy,
                                     dy, out, dt, {cuda::Epilogue::kGeluAuxBias, dbias, daux}));
      y = download(dy, dt, xw.size(), s_);
      const std::vector<float> aux = download(daux, dt, xw.size(), s_);
      for (size_t i = 0; i < y.size(); ++i) {
        const double pre = xw[i] + bias[i % out];
        EXPECT_NEAR(aux[i], pre, tol * (1 + std::fabs(pre)));
        EXPECT_NEAR(y[i], kmath::gelu(static_cast<float>(pre)), tol * (1 + std::fabs(pre)));
      }
      // dW[in,out] += x^T dy; db[out] = column sums of dy (here: add).
      const auto g0 = pattern(size_t(in) * out, 5);
      float* dg = upload<float>(g0);
      float* ddb = upload<float>(std::vector<float>(out, 7.0f));
      ASSERT_TRUE(blas.gemm_epilogue(true, false, in, out, t, {dx, in}, {dadd, out}, dt, 1.0f, dg,
                                     dg, out, cuda::Dtype::kFp32,
                                     {cuda::Epilogue::kBiasGradB, ddb, nullptr}));
      const std::vector<float> g = download(dg, cuda::Dtype::kFp32, g0.size(), s_);
      const std::vector<float> db = download(ddb, cuda::Dtype::kFp32, out, s_);
      for (int c = 0; c < out; ++c) {
        double col = 0;
        for (int r = 0; r < t; ++r) col += add[size_t(r) * out + c];
        EXPECT_NEAR(db[c], col, 1e-5) << "bias gradient column " << c;  // overwritten, not added
        for (int p = 0; p < in; ++p) {
          double want = g0[size_t(p) * out + c];
          for (int r = 0; r < t; ++r) want += double(x[r * in + p]) * add[size_t(r) * out + c];
          EXPECT_NEAR(g[size_t(p) * out + c], want, 1e-5);
        }
      }
      for (void* p :
           {dx, dw, dbias, dadd, dy, daux, static_cast<void*>(dg), static_cast<void*>(ddb)}) {
        EXPECT_EQ(cudaFree(p), cudaSuccess);
      }
    }
    EXPECT_EQ(blas.epilogue_gemms(), 6);
    EXPECT_EQ(blas.epilogue_refusals(), 0);
    EXPECT_EQ(blas.first_epilogue_refusal(), "");
  }
  EXPECT_EQ(cudaFree(ws), cudaSuccess);
}

// Where cuBLASLt's heuristic offers no algorithm (here: an aux leading
// dimension that is no multiple of 8), gemm_epilogue enqueues nothing and
// says so, and the answer is remembered.
TEST_F(CudaEmu, ACublasLtEpilogueWithoutAnAlgorithmIsRefusedAndLeavesCUntouched) {
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 1 << 20), cudaSuccess);
  {
    cuda::Blas blas(s_, ws, 1 << 20);
    const int t = 2;
    const int in = 3;
    const int out = 12;
    float* x = upload<float>(pattern(size_t(t) * in, 1));
    float* w = upload<float>(pattern(size_t(in) * out, 2));
    float* bias = upload<float>(pattern(out, 3));
    float* y = upload<float>(std::vector<float>(size_t(t) * out, 5.0f));
    float* aux = upload<float>(std::vector<float>(size_t(t) * out, 5.0f));
    for (int call = 0; call < 2; ++call) {
      EXPECT_FALSE(blas.gemm_epilogue(false, false, t, out, in, {x, in}, {w, out},
                                      cuda::Dtype::kFp32, 0.0f, y, y, out, cuda::Dtype::kFp32,
                                      {cuda::Epilogue::kGeluAuxBias, bias, aux}));
    }
    EXPECT_EQ(blas.epilogue_refusals(), 2);
    EXPECT_EQ(blas.epilogue_gemms(), 0);
    EXPECT_EQ(blas.first_epilogue_refusal(),
              "bias + GeLU GEMM 2 x 12 x 3 fp32: cublasLtMatmulAlgoGetHeuristic: "
              "CUBLAS_STATUS_NOT_SUPPORTED");
    for (float v : download(y, cuda::Dtype::kFp32, size_t(t) * out, s_)) EXPECT_EQ(v, 5.0f);
    for (float* p : {x, w, bias, y, aux}) EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
  EXPECT_EQ(cudaFree(ws), cudaSuccess);
}

// Where cublasLtMatmul refuses (NOT_SUPPORTED) the algorithm its heuristic
// offered (PPB_CUDAEMU_LT_REFUSE plays such a cuBLASLt), the planned work
// enqueues nothing and says so, so that its caller computes the call another
// way; the call counts as refused once however often its work runs, the
// shape is refused from then on, and other epilogues stay fused.
TEST_F(CudaEmu, ACublasLtMatmulRefusedAtRunTimeCountsOnceAndLeavesCUntouched) {
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 1 << 20), cudaSuccess);
  ASSERT_EQ(setenv("PPB_CUDAEMU_LT_REFUSE", "gelu", 1), 0);
  struct Restore {  // whatever the test's outcome, later tests run as before
    void* ws;
    ~Restore() {
      unsetenv("PPB_CUDAEMU_LT_REFUSE");
      cudaFree(ws);
    }
  } restore{ws};
  {
    cuda::Blas blas(s_, ws, 1 << 20);
    const int t = 2;
    const int in = 8;
    const int out = 16;
    float* x = upload<float>(pattern(size_t(t) * in, 1));
    float* w = upload<float>(pattern(size_t(in) * out, 2));
    float* bias = upload<float>(pattern(out, 3));
    float* y = upload<float>(std::vector<float>(size_t(t) * out, 5.0f));
    float* aux = upload<float>(std::vector<float>(size_t(t) * out, 5.0f));
    const auto plan = [&](cuda::Epilogue kind) {
      return blas.plan_epilogue(false, false, t, out, in, {x, in}, {w, out}, cuda::Dtype::kFp32,
                                0.0f, y, y, out, cuda::Dtype::kFp32,
                                {kind, bias, kind == cuda::Epilogue::kGeluAuxBias ? aux : nullptr});
    };
    const std::function<bool()> gelu = plan(cuda::Epilogue::kGeluAuxBias);
    ASSERT_TRUE(gelu);  // the heuristic offered an algorithm
    EXPECT_EQ(blas.epilogue_gemms(), 1);
    EXPECT_FALSE(gelu());
    EXPECT_FALSE(gelu());  // run again (a recorded action): still refused, counted once
    EXPECT_EQ(blas.epilogue_gemms(), 0);
    EXPECT_EQ(blas.epilogue_refusals(), 1);
    EXPECT_EQ(blas.first_epilogue_refusal(),
              "bias + GeLU GEMM 2 x 16 x 8 fp32: cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED for "
              "the algorithm cublasLtMatmulAlgoGetHeuristic offered");
    EXPECT_FALSE(plan(cuda::Epilogue::kGeluAuxBias));  // the shape is refused from now on
    EXPECT_EQ(blas.epilogue_refusals(), 2);
    for (float v : download(y, cuda::Dtype::kFp32, size_t(t) * out, s_)) EXPECT_EQ(v, 5.0f);
    for (float v : download(aux, cuda::Dtype::kFp32, size_t(t) * out, s_)) EXPECT_EQ(v, 5.0f);
    const std::function<bool()> plain = plan(cuda::Epilogue::kBias);
    ASSERT_TRUE(plain);
    EXPECT_TRUE(plain());
    EXPECT_EQ(blas.epilogue_gemms(), 1);
    EXPECT_NE(download(y, cuda::Dtype::kFp32, 1, s_)[0], 5.0f);
    for (float* p : {x, w, bias, y, aux}) EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
}

TEST_F(CudaEmu, AKernelComputesWhatItsSourceSays) {
  // gelu through the backend's launcher: nvcc's host stub, the emulator's
  // launch, the kernel's CPU twin; against the shared element math.
  const int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i - 500) / 100;
  float* dx = upload<float>(x);
  float* dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dy, n * sizeof(float)), cudaSuccess);
  cuda::gelu_fwd(cuda::Dtype::kFp32, dx, dy, n, s_);
  std::vector<float> y(n);
  ASSERT_EQ(cudaMemcpyAsync(y.data(), dy, n * 4, cudaMemcpyDeviceToHost, s_), cudaSuccess);
  for (int i = 0; i < n; ++i) EXPECT_EQ(y[i], kmath::gelu(x[i])) << i;
  EXPECT_EQ(cudaFree(dx), cudaSuccess);
  EXPECT_EQ(cudaFree(dy), cudaSuccess);
}

float read_float(const float* d, cudaStream_t s) {
  float v = 0;
  EXPECT_EQ(cudaMemcpyAsync(&v, d, sizeof v, cudaMemcpyDeviceToHost, s), cudaSuccess);
  return v;
}

TEST_F(CudaEmu, ACapturedGraphRunsNothingAtCaptureAndItsWorkInOrderAtEachLaunch) {
  // The optimizer step's shape: set the gradient, the update kernel (which
  // zeroes it), then copy the weight out; after a memset of the copy.
  const int n = 300;
  float* master = upload<float>(std::vector<float>(n, 10.0f));
  float* ones = upload<float>(std::vector<float>(n, 1.0f));
  float* grads = upload<float>(std::vector<float>(n, 0.0f));
  float* snap = upload<float>(std::vector<float>(n, -1.0f));
  ASSERT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(s_, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  {
    const float lr = 0.5f;  // the launch's argument array dies here: bound by value
    ASSERT_EQ(cudaMemsetAsync(snap, 0, n * sizeof(float), s_), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(grads, ones, n * sizeof(float), cudaMemcpyDeviceToDevice, s_),
              cudaSuccess);
    cuda::sgd(master, grads, n, lr, cuda::Dtype::kFp32, nullptr, s_);
    ASSERT_EQ(cudaMemcpyAsync(snap, master, n * sizeof(float), cudaMemcpyDeviceToDevice, s_),
              cudaSuccess);
  }
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s_, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(cudaStreamIsCapturing(s_, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_EQ(read_float(master, s_), 10.0f) << "the capture ran the kernel";
  EXPECT_EQ(read_float(snap, s_), -1.0f) << "the capture ran the memset";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);  // the exec outlives it
  // A launch is stream-ordered: behind a closed gate nothing of it runs.
  Gate gate;
  ASSERT_EQ(cudaLaunchHostFunc(s_, &Gate::wait, &gate), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s_), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Emulated device memory is host memory: looked at while the gate holds.
  EXPECT_EQ(master[0], 10.0f) << "a launch ran before the work ahead of it";
  gate.open = true;
  // Three launches, each in captured order: master 10 - 3 * 0.5, the copy
  // after the kernel and after the memset, the gradient zeroed.
  std::vector<float> w(n), out(n), g(n);
  ASSERT_EQ(cudaMemcpyAsync(w.data(), master, sizeof(float) * n, cudaMemcpyDeviceToHost, s_),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), snap, sizeof(float) * n, cudaMemcpyDeviceToHost, s_),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(g.data(), grads, sizeof(float) * n, cudaMemcpyDeviceToHost, s_),
            cudaSuccess);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(w[i], 8.5f) << i;
    EXPECT_EQ(out[i], 8.5f) << i;
    EXPECT_EQ(g[i], 0.0f) << i;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s_), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
  for (float* p : {master, ones, grads, snap}) EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(CudaEmu, ACallACaptureCannotHoldInvalidatesItAndEndsItWithoutAGraph) {
  float* d = upload<float>(std::vector<float>(4, 3.0f));
  float host[4] = {};
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  void* pooled = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  // Each refused call: the error, the capture invalidated (later work on the
  // stream fails), no graph, and the stream runs eagerly again afterwards.
  const std::vector<std::pair<std::string, std::function<cudaError_t()>>> refused = {
      {"synchronous cudaMemcpy", [&] { return cudaMemcpy(host, d, 16, cudaMemcpyDeviceToHost); }},
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(s_); }},
      {"cudaMallocAsync", [&] { return cudaMallocAsync(&pooled, 64, s_); }},
      {"cudaMalloc", [&] { return cudaMalloc(&pooled, 64); }},
      {"cudaHostAlloc", [&] { return cudaHostAlloc(&pooled, 64, cudaHostAllocDefault); }},
      {"cudaFree", [&] { return cudaFree(d); }},
      {"cudaEventRecord", [&] { return cudaEventRecord(e, s_); }},
      {"cudaEventSynchronize", [&] { return cudaEventSynchronize(e); }},
      {"a copy into pageable memory",
       [&] { return cudaMemcpyAsync(host, d, 16, cudaMemcpyDeviceToHost, s_); }},
  };
  for (const auto& [what, call] : refused) {
    SCOPED_TRACE(what);
    ASSERT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    // Another stream, and the legacy stream from another thread, are not the
    // thread-local capture's business.
    EXPECT_EQ(cudaMemsetAsync(d, 0, 4, other), cudaSuccess);
    std::thread([&] {
      EXPECT_EQ(cudaMemcpy(host, d, 16, cudaMemcpyDeviceToHost), cudaSuccess);
    }).join();
    EXPECT_EQ(call(), cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(s_, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    EXPECT_EQ(cudaMemsetAsync(d, 0, 16, s_), cudaErrorStreamCaptureInvalidated);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s_, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    (void)cudaGetLastError();
    EXPECT_EQ(cudaMemsetAsync(d, 0, 4, s_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  }
  EXPECT_EQ(pooled, nullptr);
  // No capture to end, none on the legacy stream, none begun twice.
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s_, &graph), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  ASSERT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamEndCapture(s_, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);  // empty, as CUDA gives one
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(other), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(CudaEmu, AKernelGivenPageableHostMemoryEndsTheJobNamingTheArgument) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> host(64, 1.0f);
  EXPECT_DEATH(
      {
        float* dy = nullptr;
        PPB_CUDA_CHECK(cudaMalloc(&dy, 64 * sizeof(float)));
        cuda::gelu_fwd(cuda::Dtype::kFp32, host.data(), dy, 64, s_);
      },
      "launch of void ppb::cuda::device::ppb_gelu_fwd<float>.*argument 0 .* is host memory a "
      "kernel cannot reach");
}

}  // namespace
}  // namespace ppb
