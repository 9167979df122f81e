// An NVTX injection library for tests: loaded by NVTX through
// NVTX_INJECTION64_PATH, it records domain creation, category names,
// registered strings and push/pop of domain ranges as lines in the file named
// by PPB_NVTX_RECORD (a "%p" in it becomes the process id):
//   domain <name>
//   category <id> <name>
//   push <domain> <category> <payload> <message>
//   pop <domain>
//   start <id> <domain> <category> <payload> <message>
//   end <id>
//   thread <tid> <name>
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

std::mutex g_mutex;
FILE* g_out = nullptr;
std::unordered_map<const void*, std::string> g_domains;
std::unordered_map<const void*, std::string> g_strings;
int g_next_handle = 1;

// Handles are opaque to NVTX clients: distinct addresses are enough.
// NOLINTNEXTLINE(performance-no-int-to-ptr): fake handles, never dereferenced
void* new_handle() { return reinterpret_cast<void*>(static_cast<uintptr_t>(g_next_handle++) << 4); }

void line(const std::string& text) {
  if (g_out == nullptr) return;
  std::fprintf(g_out, "%s\n", text.c_str());
  std::fflush(g_out);
}

nvtxDomainHandle_t domain_create(const char* name) {
  std::lock_guard lock(g_mutex);
  auto* h = static_cast<nvtxDomainHandle_t>(new_handle());
  g_domains[h] = name;
  line(std::string("domain ") + name);
  return h;
}

void domain_name_category(nvtxDomainHandle_t d, uint32_t category, const char* name) {
  std::lock_guard lock(g_mutex);
  line("category " + g_domains[d] + " " + std::to_string(category) + " " + name);
}

nvtxStringHandle_t register_string(nvtxDomainHandle_t, const char* text) {
  std::lock_guard lock(g_mutex);
  auto* h = static_cast<nvtxStringHandle_t>(new_handle());
  g_strings[h] = text;
  return h;
}

int range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* attr) {
  std::lock_guard lock(g_mutex);
  std::string message;
  if (attr->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    message = g_strings[attr->message.registered];
  } else if (attr->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    message = std::string("ascii:") + attr->message.ascii;
  }
  long long payload = attr->payloadType == NVTX_PAYLOAD_TYPE_INT64 ? attr->payload.llValue : -999;
  line("push " + g_domains[d] + " " + std::to_string(attr->category) + " " +
       std::to_string(payload) + " " + message);
  return 0;
}

nvtxRangeId_t range_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t* attr) {
  std::lock_guard lock(g_mutex);
  nvtxRangeId_t id = static_cast<nvtxRangeId_t>(g_next_handle++);
  line("start " + std::to_string(id) + " " + g_domains[d] + " " + std::to_string(attr->category) +
       " " + std::to_string(attr->payload.llValue) + " " + g_strings[attr->message.registered]);
  return id;
}

void range_end(nvtxDomainHandle_t, nvtxRangeId_t id) {
  std::lock_guard lock(g_mutex);
  line("end " + std::to_string(id));
}

int range_pop(nvtxDomainHandle_t d) {
  std::lock_guard lock(g_mutex);
  line("pop " + g_domains[d]);
  return 0;
}

void name_os_thread(uint32_t tid, const char* name) {
  std::lock_guard lock(g_mutex);
  line("thread " + std::to_string(tid) + " " + name);
}

template <class Fn>
void install(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  if (id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the name NVTX looks up
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  // "%p" in the path becomes the process id, so every rank of an MPI job
  // records into its own file.
  if (const char* env = std::getenv("PPB_NVTX_RECORD")) {
    std::string path(env);
    if (size_t at = path.find("%p"); at != std::string::npos) {
      path.replace(at, 2, std::to_string(getpid()));
    }
    g_out = std::fopen(path.c_str(), "w");
  }
  auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
  install(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  install(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, &domain_name_category);
  install(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  install(table, size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &range_start);
  install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &range_end);
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) {
    install(table, size, NVTX_CBID_CORE_NameOsThreadA, &name_os_thread);
  }
  return 1;
}
