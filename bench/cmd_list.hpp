// `pipebench list --json`: the registries as one JSON document for machines.
#pragma once

#include <boost/json.hpp>

namespace ppb::cli {

/// Every registered schedule, partition, backend, transport, collector,
/// model and device, each as an object of its registry entry's fields
/// (availability probed here, as `pipebench list` shows it):
///   {"schema": "pipebench.list/1",
///    "schedules": [{"name": "1f1b", "help": "...", "splits_backward": false, ...}, ...],
///    "partitions": [...], "backends": [...], "transports": [...],
///    "collectors": [...], "models": [...], "devices": [...],
///    "gpus": {"count": 1, "name": "NVIDIA H200", "why_not": ""},
///    "build": {"git": "fb28eb07b128", "cuda": true}}
/// ("gpus": the CUDA devices this process sees, device 0's name, or why
/// there is none: count 0, name ""; "build": this binary's revision, as
/// its results record it in environment.git, and whether it has CUDA).
/// Each list is in its registry's order; docs/cli.md lists the fields.
boost::json::object list_document();

}  // namespace ppb::cli
