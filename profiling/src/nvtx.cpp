#include "ppb/profiling/nvtx.hpp"

#if defined(PPB_HAVE_NVTX) && !defined(PPB_NVTX_DISABLE)
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <unordered_map>
#endif

namespace ppb::nvtx {

const char* category_name(Category category) {
  switch (category) {
    case Category::kForward:
      return "forward";
    case Category::kBackward:
      return "backward";
    case Category::kWgrad:
      return "wgrad";
    case Category::kSend:
      return "send";
    case Category::kRecv:
      return "recv";
    case Category::kOptimizer:
      return "optimizer";
    case Category::kSync:
      return "sync";
    case Category::kStep:
      return "step";
  }
  return "unknown";
}

#if defined(PPB_HAVE_NVTX) && !defined(PPB_NVTX_DISABLE)

namespace {

struct Domain {
  nvtxDomainHandle_t handle = nullptr;
  std::mutex mutex;
  // Registered strings: one handle per distinct name, for the life of the process.
  std::unordered_map<std::string, nvtxStringHandle_t> strings;
};

Domain& domain() {
  static Domain* d = [] {
    auto* created = new Domain();  // never destroyed: ranges may close during exit
    created->handle = nvtxDomainCreateA("pipebench");
    for (uint32_t c = 1; c <= static_cast<uint32_t>(Category::kStep); ++c) {
      nvtxDomainNameCategoryA(created->handle, c, category_name(static_cast<Category>(c)));
    }
    return created;
  }();
  return *d;
}

nvtxStringHandle_t registered(Domain& d, std::string_view message) {
  std::lock_guard lock(d.mutex);
  auto it = d.strings.find(std::string(message));
  if (it != d.strings.end()) return it->second;
  std::string key(message);
  nvtxStringHandle_t h = nvtxDomainRegisterStringA(d.handle, key.c_str());
  d.strings.emplace(std::move(key), h);
  return h;
}

}  // namespace

bool compiled_in() { return true; }

void init() { (void)domain(); }

void name_this_thread(std::string_view name) {
  std::string copy(name);
  nvtxNameOsThreadA(static_cast<uint32_t>(gettid()), copy.c_str());
}

nvtxEventAttributes_t attributes(Domain& d, std::string_view message, Category category,
                                 int64_t payload) {
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.category = static_cast<uint32_t>(category);
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = registered(d, message);
  attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  attr.payload.llValue = payload;
  return attr;
}

void push(std::string_view message, Category category, int64_t payload) {
  Domain& d = domain();
  nvtxEventAttributes_t attr = attributes(d, message, category, payload);
  nvtxDomainRangePushEx(d.handle, &attr);
}

uint64_t start_range(std::string_view message, Category category, int64_t payload) {
  Domain& d = domain();
  nvtxEventAttributes_t attr = attributes(d, message, category, payload);
  return nvtxDomainRangeStartEx(d.handle, &attr);
}

void end_range(uint64_t id) {
  if (id != 0) nvtxDomainRangeEnd(domain().handle, id);
}

void pop() { nvtxDomainRangePop(domain().handle); }

#else  // NVTX not compiled in: nothing to do.

bool compiled_in() { return false; }
void init() {}
void name_this_thread(std::string_view) {}
void push(std::string_view, Category, int64_t) {}
void pop() {}
uint64_t start_range(std::string_view, Category, int64_t) { return 0; }
void end_range(uint64_t) {}

#endif

}  // namespace ppb::nvtx
