// The CPU twins of the cuda backend's kernels: the same source
// (cuda/kernels_device.cuh) compiled as host code, registered under the
// names nvcc gives the device functions, so that a launch from the CUDA
// build's own binary runs its kernel here. A kernel missing from the list
// below fails its first launch, naming it.
#include "device_shim.hpp"
// (the shim first: it defines the keywords the kernels use)
#include <cxxabi.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "cuda/flash_device.cuh"
#include "cuda/kernels_device.cuh"
#include "emu.hpp"

namespace ppb::cudaemu {
namespace {

// "(float const*, float*, long)" for void(const float*, float*, long).
template <class... A>
std::string param_list() {
  int status = 0;
  char* text = abi::__cxa_demangle(typeid(void(A...)).name(), nullptr, nullptr, &status);
  std::string out = status == 0 && text != nullptr ? text : "";
  std::free(text);
  const size_t paren = out.find('(');
  return paren == std::string::npos ? out : out.substr(paren);
}

// A kernel reaches device memory and pinned host memory (unified
// addressing), never pageable host memory.
template <class T>
bool reachable(const T& /*value*/, size_t /*index*/, std::string* /*why*/) {
  return true;
}
template <class T>
bool reachable(T* p, size_t index, std::string* why) {
  if (p == nullptr || space_of(p) != Space::kPageable) return true;
  char text[32];
  std::snprintf(text, sizeof text, "%p", static_cast<const void*>(p));
  *why = "argument " + std::to_string(index) + " (" + text +
         ") is host memory a kernel cannot reach (not from cudaMalloc, a pool or cudaHostAlloc)";
  return false;
}

template <class... A, size_t... I>
std::function<void()> bind_args(void (*kernel)(A...), void** args, std::string* why,
                                std::index_sequence<I...> /*indices*/) {
  auto values =
      std::make_shared<std::tuple<std::decay_t<A>...>>(*static_cast<std::decay_t<A>*>(args[I])...);
  bool good = true;
  ((good = good && reachable(std::get<I>(*values), I, why)), ...);
  if (!good) return {};
  return [kernel, values] { std::apply(kernel, *values); };
}

template <class... A>
Twin twin_of(void (*kernel)(A...)) {
  Twin t;
  t.params = param_list<A...>();
  t.bind = [kernel](void** args, std::string* why) {
    return bind_args(kernel, args, why, std::index_sequence_for<A...>{});
  };
  return t;
}

namespace dev = ::ppb::cuda::device;

// f(std::integral_constant<int, D>) for each head dimension the flash
// kernels are built for.
template <class F>
void for_each_flash_dim(F&& f) {
  f(std::integral_constant<int, 32>{});
  f(std::integral_constant<int, 64>{});
  f(std::integral_constant<int, 128>{});
}

#define PPB_TWIN(k) register_twin(#k, twin_of(&dev::k))
#define PPB_TWIN_T(k)                                   \
  register_twin(#k "<float>", twin_of(&dev::k<float>)); \
  register_twin(#k "<__nv_bfloat16>", twin_of(&dev::k<__nv_bfloat16>))

const bool kRegistered = [] {
  PPB_TWIN_T(ppb_embedding_fwd);
  PPB_TWIN_T(ppb_embedding_bwd_weight);
  PPB_TWIN_T(ppb_layernorm_stats);
  PPB_TWIN_T(ppb_layernorm_fwd);
  PPB_TWIN_T(ppb_layernorm_bwd_input);
  PPB_TWIN_T(ppb_gelu_fwd);
  PPB_TWIN_T(ppb_gelu_bwd);
  PPB_TWIN_T(ppb_bias_fill);
  PPB_TWIN_T(ppb_column_partials);
  PPB_TWIN(ppb_column_finish);
  PPB_TWIN_T(ppb_attention_softmax_fwd);
  PPB_TWIN_T(ppb_attention_softmax_bwd);
  PPB_TWIN_T(ppb_cross_entropy_fwd);
  PPB_TWIN(ppb_loss_sum);
  PPB_TWIN_T(ppb_cross_entropy_bwd);
  PPB_TWIN_T(ppb_sgd);
  PPB_TWIN_T(ppb_to_storage);
  PPB_TWIN_T(ppb_to_float);
  PPB_TWIN(ppb_flash_attention_rowdot);
  for_each_flash_dim([](auto dd) {
    constexpr int kD = decltype(dd)::value;
    const std::string dim = "<" + std::to_string(kD) + ">";
    register_twin("ppb_flash_attention_fwd" + dim, twin_of(&dev::ppb_flash_attention_fwd<kD>));
    register_twin("ppb_flash_attention_bwd_kv" + dim,
                  twin_of(&dev::ppb_flash_attention_bwd_kv<kD>));
    register_twin("ppb_flash_attention_bwd_q" + dim, twin_of(&dev::ppb_flash_attention_bwd_q<kD>));
  });
  PPB_TWIN(ppb_plant_mark);
  PPB_TWIN(ppb_plant_spin);
  return true;
}();

}  // namespace
}  // namespace ppb::cudaemu
