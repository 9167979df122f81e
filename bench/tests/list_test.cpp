// `pipebench list --json` (cmd_list.hpp): the document round-trips through
// text and lists every entry of every registry, in registry order, with the
// traits the report and the planner read.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "build_info.hpp"
#include "cmd_list.hpp"
#include "ppb/exec/backend.hpp"
#include "ppb/exec/collector.hpp"
#include "ppb/exec/cuda_device.hpp"
#include "ppb/exec/transport.hpp"
#include "ppb/pipeline/device.hpp"
#include "ppb/pipeline/model.hpp"
#include "ppb/pipeline/partition.hpp"
#include "ppb/pipeline/schedule.hpp"

namespace ppb::cli {
namespace {

namespace json = boost::json;

// The document as a reader gets it: printed, then parsed.
json::object parsed() { return json::parse(json::serialize(list_document())).as_object(); }

std::vector<std::string> names_in(const json::object& doc, const char* list) {
  std::vector<std::string> out;
  for (const json::value& v : doc.at(list).as_array())
    out.emplace_back(v.as_object().at("name").as_string());
  return out;
}

template <class Info>
std::vector<std::string> names_of(const std::vector<Info>& registry) {
  std::vector<std::string> out;
  for (const Info& i : registry) out.push_back(i.name);
  return out;
}

TEST(ListJson, ListsEveryEntryOfEveryRegistryInItsOrder) {
  const json::object doc = parsed();
  EXPECT_EQ(doc.at("schema").as_string(), "pipebench.list/1");
  EXPECT_EQ(names_in(doc, "schedules"), names_of(schedule_list()));
  EXPECT_EQ(names_in(doc, "partitions"), names_of(partition_list()));
  EXPECT_EQ(names_in(doc, "backends"), names_of(backend_list()));
  EXPECT_EQ(names_in(doc, "transports"), names_of(transport_list()));
  EXPECT_EQ(names_in(doc, "collectors"), names_of(collector_list()));
  EXPECT_EQ(names_in(doc, "models"), model_preset_names());
  EXPECT_EQ(names_in(doc, "devices"), device_preset_names());
}

TEST(ListJson, CarriesTheTraitsTheReportAndThePlannerRead) {
  const json::object doc = parsed();
  const json::array& schedules = doc.at("schedules").as_array();
  for (size_t i = 0; i < schedule_list().size(); ++i) {
    const ScheduleInfo& s = schedule_list()[i];
    const json::object& o = schedules[i].as_object();
    EXPECT_EQ(o.at("colour").as_string(), s.colour) << s.name;
    EXPECT_EQ(o.at("report_order").as_int64(), s.report_order) << s.name;
    EXPECT_EQ(o.at("inflight_formula").as_string(), s.inflight_formula) << s.name;
    EXPECT_EQ(o.at("splits_backward").as_bool(), s.splits_backward) << s.name;
    EXPECT_EQ(o.at("fixed_chunks").as_int64(), s.fixed_chunks) << s.name;
    EXPECT_EQ(o.at("closed_form_bubble").as_bool(), s.closed_form_bubble) << s.name;
  }
  const json::array& backends = doc.at("backends").as_array();
  for (size_t i = 0; i < backend_list().size(); ++i) {
    const BackendInfo& b = backend_list()[i];
    const json::object& o = backends[i].as_object();
    EXPECT_EQ(o.at("resident_bytes").as_int64(), b.traits.resident_bytes) << b.name;
    EXPECT_EQ(o.at("device").as_bool(), b.traits.device) << b.name;
    EXPECT_EQ(o.at("kernels").as_string(), !b.traits.kernels                    ? "device"
                                           : *b.traits.kernels == Kernels::kCpu ? "cpu"
                                                                                : "cuda")
        << b.name;
    EXPECT_EQ(o.at("real_gradients").as_bool(), b.real_gradients) << b.name;
    EXPECT_EQ(o.at("available").as_bool(), b.unusable == nullptr || b.unusable().empty()) << b.name;
  }
  for (const json::value& v : doc.at("collectors").as_array()) {
    const json::object& o = v.as_object();
    EXPECT_EQ(o.at("available").as_bool(), o.at("why_not").as_string().empty());
  }
  const json::object& tiny = doc.at("models").as_array().front().as_object();
  const ModelSpec spec = parse_model_spec(std::string(tiny.at("name").as_string()));
  EXPECT_EQ(tiny.at("layers").as_int64(), spec.layers);
  EXPECT_EQ(tiny.at("parameters").as_int64(), parameter_count(spec));
  const json::object& dev = doc.at("devices").as_array().back().as_object();
  EXPECT_EQ(dev.at("memory_bytes").as_int64(),
            device_preset(std::string(dev.at("name").as_string()), 2).memory_bytes);
}

// What ci/suite reads to decide on its GPU sweep: the devices this process
// sees, device 0's name, or why there is none (exactly one of the two); the
// revision results of this binary record.
TEST(ListJson, SaysHowManyGpusThisProcessSeesOrWhyNone) {
  const json::object gpus = parsed().at("gpus").as_object();
  EXPECT_EQ(gpus.at("count").as_int64(), cuda::visible_devices());
  EXPECT_EQ(gpus.at("why_not").as_string(), cuda::unusable_reason());
  const bool some = gpus.at("count").as_int64() > 0;
  EXPECT_EQ(some, gpus.at("why_not").as_string().empty());
  EXPECT_EQ(some, !gpus.at("name").as_string().empty());
  const json::object build = parsed().at("build").as_object();
  EXPECT_EQ(build.at("git").as_string(), build_info().git_revision);
  EXPECT_EQ(build.at("cuda").as_bool(), build_info().with_cuda);
}

}  // namespace
}  // namespace ppb::cli
