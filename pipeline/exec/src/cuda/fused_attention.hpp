// The fused attention (scaled dot product, causal, scale 1/sqrt(d)) of the
// cuda backend's attention unit: cuDNN's flash attention for bf16, the
// backend's own fp32 flash kernels (kernels.hpp's flash_attention_*: 3xTF32
// on the tensor cores) for fp32. The forward writes the context and the
// fp32 softmax statistics (log-sum-exp per row, [b, a, s]) that the
// backward reads instead of the s x s probabilities. Q, K and V are read in
// place from the packed qkv rows ([b, s, 3h]: head j of q at column j*d, of
// k at h + j*d, of v at 2h + j*d), and dQ, dK, dV written in place into the
// same layout: no copies.
//
// bf16: the two cuDNN graphs (forward, backward) are built once per shape
// and device in the process, by the first object of that shape (the run's
// trial build, before the run: fused_attention_refusal), and kept: every
// chunk of every combination the process runs shares them. They are
// executed on the object's stream; each call is given its
// workspace (forward_workspace() / backward_workspace() bytes) by the
// chunk, which counts it as the action's workspace. The frontend is
// header-only and loads libcudnn.so.9 at run time
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING): no binary needs cuDNN to start,
// so the CUDA emulator's runs load nothing of it. In a build without cuDNN
// (PPB_HAVE_CUDNN 0) cudnn_unavailable_reason() says so and making a bf16
// FusedAttention is a broken invariant (the run's choice refused it).
// fp32: no cuDNN; the backward's workspace is the softmax backward's row
// terms (b x a x s floats).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "ppb/pipeline/model.hpp"

namespace ppb::cuda {

class FusedAttention {
 public:
  /// For `spec`'s shape (b = micro_batch_size, a = heads, s = seq, d =
  /// hidden / heads) and storage: bf16 builds both cuDNN graphs, fp32
  /// readies the flash kernels. `modelled_workspace` is the backward
  /// scratch the memory model counts (Unit::backward_scratch_bytes); one
  /// warning line where the kernels ask for more. REQUIRES:
  /// fused_attention_unavailable_reason(e, d) == "" and
  /// fused_attention_head_dim(e, d), e = spec.bytes_per_element.
  FusedAttention(const ModelSpec& spec, cudaStream_t stream, int64_t modelled_workspace);
  /// fused_attention_refusal(): why cuDNN cannot build `spec`'s bf16
  /// graphs on the bound device, "" when it can.
  static std::string refusal(const ModelSpec& spec);
  ~FusedAttention();
  FusedAttention(const FusedAttention&) = delete;
  FusedAttention& operator=(const FusedAttention&) = delete;

  /// How many shapes' graphs this process has built (each once).
  static int64_t graphs_built();

  /// The workspace bytes each graph asks for.
  int64_t forward_workspace() const;
  int64_t backward_workspace() const;
  /// out[b, s, h] and stats[b, a, s] (fp32) from qkv[b, s, 3h], in the
  /// storage dtype.
  void forward(const void* qkv, void* out, float* stats, void* workspace) const;
  /// dqkv[b, s, 3h] from qkv, the forward's out and stats, and dout[b, s, h].
  void backward(const void* qkv, const void* out, const float* stats, const void* dout, void* dqkv,
                void* workspace) const;

 private:
  struct Graphs;  // the cuDNN handle, the two graphs (fused_attention.cpp)
  struct Kept;    // the graphs built, by device and shape
  static Kept& kept();
  static std::unique_ptr<Graphs> build_graphs(const ModelSpec& spec, cudaStream_t stream);
  /// The kept graphs of `spec`'s shape on the current device, built on
  /// `stream` where there are none yet, bound to `stream`.
  static std::shared_ptr<Graphs> shared_graphs(const ModelSpec& spec, cudaStream_t stream);
  /// shared_graphs() into `out`: "" where cuDNN built them, else why not
  /// (its refusal, or an exception of the frontend's own); out of memory,
  /// usage and capture errors propagate.
  static std::string build_or_why(const ModelSpec& spec, cudaStream_t stream,
                                  std::shared_ptr<Graphs>& out);
  std::shared_ptr<Graphs> graphs_;  // bf16: shared with every object of the shape; null for fp32
  int b_ = 0, s_ = 0, heads_ = 0, d_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace ppb::cuda
