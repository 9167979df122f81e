// PyTorch pipelining's schedule CSV (torch.distributed.pipelining): read and
// written. One row per rank, one cell per action in execution order; a
// compute cell names the VIRTUAL stage (PyTorch's stage index), the op and
// the micro-batch: "0F3", "7I2", "2W0", "1B3" (B: full backward; the older
// spelling "BW" reads the same), "(0F7;7B3)OVERLAP_F_B" for an overlapped
// pair. Communication cells ("0SEND_F3", "2RECV_B1", ...) are checked
// against the message plan pipebench derives itself; FSDP cells (UNSHARD,
// RESHARD, REDUCE_GRAD) are refused, naming the row and column.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ppb/pipeline/message_plan.hpp"
#include "ppb/pipeline/schedule_io.hpp"
#include "ppb/pipeline/validator.hpp"
#include "ppb/profiling/check.hpp"

namespace ppb {
namespace {

// Large enough for any real schedule, small enough that sizes cannot overflow.
constexpr int64_t kMaxIndex = 1 << 24;

enum class CommOp : uint8_t { kSendF, kRecvF, kSendB, kRecvB };

// One cell's compute action or communication, by virtual stage.
struct CsvCompute {
  ActionKind kind = ActionKind::kForward;
  int32_t vstage = 0;
  int32_t microbatch = 0;
  bool overlap = false;  // the F of an overlapped pair
};
struct CsvComm {
  CommOp op = CommOp::kSendF;
  int32_t vstage = 0;
  int32_t microbatch = 0;
  size_t row = 0, column = 0;  // 1-based, for messages
  size_t after = 0;            // compute actions of the row before it
};

struct CsvRows {
  std::vector<std::vector<CsvCompute>> compute;  // per row
  std::vector<CsvComm> comms;
};

class CellError {
 public:
  CellError(std::string_view source, size_t row, size_t column, std::string_view cell)
      : prefix_(std::string(source) + ": row " + std::to_string(row) + " (rank " +
                std::to_string(row - 1) + "), column " + std::to_string(column) + ": cell '" +
                std::string(cell.substr(0, 64)) + (cell.size() > 64 ? "...'" : "'")) {}
  [[noreturn]] void fail(const std::string& what) const { throw UsageError(prefix_ + ": " + what); }

 private:
  std::string prefix_;
};

bool parse_index(std::string_view t, int32_t& out) {
  if (t.empty() || t.size() > 9) return false;
  int value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || end != t.data() + t.size() || value < 0 || value >= kMaxIndex)
    return false;
  out = value;
  return true;
}

std::string_view trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t' || t.front() == '\r'))
    t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r'))
    t.remove_suffix(1);
  return t;
}

constexpr const char* kExpected =
    "expected <stage><op><micro-batch> with op F, I, W, B (or BW), SEND_F, RECV_F, SEND_B, "
    "RECV_B (\"2F0\", \"7SEND_B3\"), or (<F cell>;<B or I cell>)OVERLAP_F_B";

// One action "<stage><op><mb>": a compute action or a communication.
// Returns the compute action, or nullopt after filling `comm`.
std::optional<CsvCompute> parse_single(std::string_view cell, const CellError& err, CsvComm& comm) {
  size_t i = 0;
  while (i < cell.size() && cell[i] >= '0' && cell[i] <= '9') ++i;
  size_t j = i;
  while (j < cell.size() && (cell[j] < '0' || cell[j] > '9')) ++j;
  const std::string_view stage = cell.substr(0, i);
  const std::string_view op = cell.substr(i, j - i);
  const std::string_view mb = cell.substr(j);
  if (op == "UNSHARD" || op == "RESHARD" || op == "REDUCE_GRAD") {
    err.fail(std::string(op) +
             " is not supported: pipebench runs unsharded stages (no FSDP); remove the "
             "UNSHARD, RESHARD and REDUCE_GRAD cells");
  }
  int32_t v = 0;
  int32_t m = 0;
  if (!parse_index(stage, v) || !parse_index(mb, m)) err.fail(kExpected);
  if (op == "F" || op == "I" || op == "W" || op == "B" || op == "BW") {
    CsvCompute c;
    c.kind = op == "F"   ? ActionKind::kForward
             : op == "I" ? ActionKind::kBackwardInput
             : op == "W" ? ActionKind::kBackwardWeight
                         : ActionKind::kBackward;
    c.vstage = v;
    c.microbatch = m;
    return c;
  }
  if (op == "SEND_F" || op == "RECV_F" || op == "SEND_B" || op == "RECV_B") {
    comm.op = op == "SEND_F"   ? CommOp::kSendF
              : op == "RECV_F" ? CommOp::kRecvF
              : op == "SEND_B" ? CommOp::kSendB
                               : CommOp::kRecvB;
    comm.vstage = v;
    comm.microbatch = m;
    return std::nullopt;
  }
  err.fail(kExpected);
}

// A cell: one action or an overlapped pair; appends to the row.
void parse_cell(std::string_view cell, const CellError& err, std::vector<CsvCompute>& row,
                std::vector<CsvComm>& comms, CsvComm where) {
  if (!cell.empty() && cell.front() == '(') {
    const size_t close = cell.find(')');
    if (close == std::string_view::npos)
      err.fail("an opening '(' without ')': " + std::string(kExpected));
    const std::string_view kind = cell.substr(close + 1);
    if (kind != "OVERLAP_F_B") {
      err.fail("a pair of actions must be (F;B)OVERLAP_F_B, got '" + std::string(kind) + "'");
    }
    const std::string_view inner = cell.substr(1, close - 1);
    const size_t semi = inner.find(';');
    if (semi == std::string_view::npos || inner.find(';', semi + 1) != std::string_view::npos)
      err.fail("OVERLAP_F_B holds exactly two actions, an F and a B or I: (0F7;7B3)OVERLAP_F_B");
    CsvComm unused;
    const auto f = parse_single(trim(inner.substr(0, semi)), err, unused);
    const auto b = parse_single(trim(inner.substr(semi + 1)), err, unused);
    if (!f || !b || f->kind != ActionKind::kForward ||
        (b->kind != ActionKind::kBackward && b->kind != ActionKind::kBackwardInput)) {
      err.fail("OVERLAP_F_B holds an F then a B or I: (0F7;7B3)OVERLAP_F_B");
    }
    row.push_back(*f);
    row.back().overlap = true;
    row.push_back(*b);
    return;
  }
  if (auto c = parse_single(cell, err, where)) {
    row.push_back(*c);
  } else {
    where.after = row.size();
    comms.push_back(where);
  }
}

// Nothing but spaces, tabs and line ends.
bool blank(std::string_view t) { return t.find_first_not_of(" \t\r\n") == std::string_view::npos; }

CsvRows parse_rows(std::string_view text, std::string_view source) {
  CsvRows out;
  // A UTF-8 byte-order mark, as spreadsheet programs write, is no cell.
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  if (text.substr(0, kByteOrderMark.size()) == kByteOrderMark)
    text.remove_prefix(kByteOrderMark.size());
  size_t pos = 0;
  size_t row_no = 0;
  while (pos < text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = trim(text.substr(pos, eol - pos));
    pos = eol + 1;
    ++row_no;
    if (line.empty()) {
      // Blank lines only at the end: a blank row in the middle would shift ranks.
      if (blank(text.substr(std::min(pos, text.size())))) break;
      throw UsageError(std::string(source) + ": row " + std::to_string(row_no) +
                       " is empty (one row per rank, no blank rows between them)");
    }
    auto& row = out.compute.emplace_back();
    size_t col = 0;
    for (size_t at = 0; at <= line.size();) {
      const size_t comma = std::min(line.find(',', at), line.size());
      const std::string_view cell = trim(line.substr(at, comma - at));
      at = comma + 1;
      ++col;
      if (cell.empty()) continue;  // PyTorch writes an idle step as an empty cell
      CsvComm where;
      where.row = row_no;
      where.column = col;
      parse_cell(cell, CellError(source, row_no, col, cell), row, out.comms, where);
    }
  }
  if (out.compute.empty()) throw UsageError(std::string(source) + ": no rows (one row per rank)");
  return out;
}

// P, V, M and the placement from the rows (or `given`); the lists by chunk.
Schedule build(const CsvRows& rows, std::string_view source, const CsvReadOptions& opt) {
  const auto P = static_cast<int>(rows.compute.size());
  int32_t max_v = -1;
  int32_t max_mb = -1;
  for (const auto& row : rows.compute) {
    for (const CsvCompute& c : row) {
      max_v = std::max(max_v, c.vstage);
      max_mb = std::max(max_mb, c.microbatch);
    }
  }
  const std::string src(source);
  if (max_v < 0) throw UsageError(src + ": no compute actions (F, B, I, W)");
  size_t cells = 0;
  for (const auto& row : rows.compute) cells += row.size();
  if (static_cast<size_t>(max_v) >= cells) {
    // Before any table by stage: each stage needs an action of its own.
    throw UsageError(src + ": stages 0.." + std::to_string(max_v) + " but only " +
                     std::to_string(cells) + " compute actions: some stage has none");
  }
  const int VP = max_v + 1;
  if (VP % P != 0) {
    throw UsageError(src + ": " + std::to_string(VP) + " virtual stages (0.." +
                     std::to_string(max_v) + ") do not divide over " + std::to_string(P) +
                     " rows (ranks)");
  }
  Schedule s;
  s.name = opt.name.empty() ? "csv" : opt.name;
  s.stages = P;
  s.chunks = VP / P;
  s.microbatches = max_mb + 1;
  std::vector<int32_t> seen(static_cast<size_t>(VP), -1);
  for (int r = 0; r < P; ++r) {
    for (const CsvCompute& c : rows.compute[static_cast<size_t>(r)]) {
      int32_t& at = seen[static_cast<size_t>(c.vstage)];
      if (at >= 0 && at != r) {
        throw UsageError(src + ": stage " + std::to_string(c.vstage) + " appears in row " +
                         std::to_string(at + 1) + " and row " + std::to_string(r + 1) +
                         " (a stage runs on one rank)");
      }
      at = r;
    }
  }
  for (int v = 0; v < VP; ++v) {
    if (seen[static_cast<size_t>(v)] < 0)
      throw UsageError(src + ": stage " + std::to_string(v) + " has no actions in any row");
  }
  if (!opt.placement.empty()) {
    if (opt.placement != seen) {
      throw UsageError(src +
                       ": the rows place stages on ranks differently from the placement "
                       "given");
    }
  }
  if (std::string e = placement_error(seen, P, s.chunks); !e.empty())
    throw UsageError(src + ": placement inferred from the rows: " + e);
  const Placement place(P, s.chunks, seen);
  if (!place.looping()) s.placement = seen;
  s.actions.resize(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    for (const CsvCompute& c : rows.compute[static_cast<size_t>(r)]) {
      Action a{c.kind, c.microbatch, place.chunk_of(c.vstage), c.overlap};
      s.actions[static_cast<size_t>(r)].push_back(a);
    }
  }
  return s;
}

// Every communication cell against the plan: it is a message of this rank,
// after the action that produces it (sends) or before the one that consumes
// it (receives); with any communication given, every message is given.
void check_comms(const CsvRows& rows, const Schedule& s, std::string_view source) {
  if (rows.comms.empty()) return;
  const MessagePlan plan = build_message_plan(s);
  const Placement& place = plan.placement;
  // (kind, microbatch, from_virtual) -> message id
  std::map<std::tuple<int, int32_t, int32_t>, int32_t> index;
  for (size_t id = 0; id < plan.messages.size(); ++id) {
    const PlannedMessage& m = plan.messages[id];
    index[{static_cast<int>(m.kind), m.microbatch, m.from_virtual}] = static_cast<int32_t>(id);
  }
  std::vector<uint8_t> sent(plan.messages.size(), 0), received(plan.messages.size(), 0);
  const int VP = place.virtual_stages();
  for (const CsvComm& c : rows.comms) {
    const std::string cell = std::to_string(c.vstage) +
                             (c.op == CommOp::kSendF   ? "SEND_F"
                              : c.op == CommOp::kRecvF ? "RECV_F"
                              : c.op == CommOp::kSendB ? "SEND_B"
                                                       : "RECV_B") +
                             std::to_string(c.microbatch);
    const CellError err(source, c.row, c.column, cell);
    const bool send = c.op == CommOp::kSendF || c.op == CommOp::kSendB;
    const bool activation = c.op == CommOp::kSendF || c.op == CommOp::kRecvF;
    if (c.vstage >= VP) err.fail("stage " + std::to_string(c.vstage) + " does not exist");
    const int rank = static_cast<int>(c.row) - 1;
    if (place.stage_of(c.vstage) != rank) {
      err.fail("stage " + std::to_string(c.vstage) + " runs on rank " +
               std::to_string(place.stage_of(c.vstage)) + ", not on this row's rank");
    }
    // The sender's virtual stage: a receive names its own stage.
    const int from = send ? c.vstage : (activation ? c.vstage - 1 : c.vstage + 1);
    const auto it = index.find(
        {static_cast<int>(activation ? MessageKind::kActivation : MessageKind::kGradient),
         c.microbatch, from});
    if (from < 0 || from >= VP || it == index.end() ||
        plan.messages[static_cast<size_t>(it->second)].local()) {
      err.fail("no such message in pipebench's message plan (stage " + std::to_string(c.vstage) +
               (send ? " sends nothing" : " receives nothing") + " here: " +
               (it != index.end() ? "the two stages share a rank, a local hand-over"
                                  : "no neighbouring stage on another rank") +
               ")");
    }
    const PlannedMessage& m = plan.messages[static_cast<size_t>(it->second)];
    auto& mark = send ? sent : received;
    if (mark[static_cast<size_t>(it->second)]++ != 0) err.fail("the message appears twice");
    // c.after compute actions of the row come before the cell.
    const auto action = static_cast<size_t>(send ? m.producer : m.consumer);
    if (send && c.after <= action)
      err.fail("a send before the action that produces it (" +
               action_to_text(s.actions[static_cast<size_t>(rank)][action], true) + ")");
    if (!send && c.after > action)
      err.fail("a receive after the action that consumes it (" +
               action_to_text(s.actions[static_cast<size_t>(rank)][action], true) + ")");
  }
  for (size_t id = 0; id < plan.messages.size(); ++id) {
    const PlannedMessage& m = plan.messages[id];
    if (m.local() || (sent[id] != 0 && received[id] != 0)) continue;
    const bool act = m.kind == MessageKind::kActivation;
    const bool no_send = sent[id] == 0;
    const int v = no_send ? m.from_virtual : m.to_virtual;
    throw UsageError(std::string(source) + ": row " +
                     std::to_string((no_send ? m.from_stage : m.to_stage) + 1) +
                     ": the file gives communication but not " + std::to_string(v) +
                     (no_send ? (act ? "SEND_F" : "SEND_B") : (act ? "RECV_F" : "RECV_B")) +
                     std::to_string(m.microbatch) + " (message plan: " + message_kind_name(m.kind) +
                     " of micro-batch " + std::to_string(m.microbatch) + " from stage " +
                     std::to_string(m.from_virtual) + " to " + std::to_string(m.to_virtual) + ")");
  }
}

std::string compute_cell(const Action& a, const Placement& place, int stage) {
  return std::to_string(place.virtual_stage(stage, a.chunk)) + action_kind_name(a.kind) +
         std::to_string(a.microbatch);
}

}  // namespace

Schedule schedule_from_csv(std::string_view text, std::string_view source,
                           const CsvReadOptions& options) {
  const CsvRows rows = parse_rows(text, source);
  Schedule s = build(rows, source, options);
  if (!rows.comms.empty()) {
    // The plan needs a complete schedule: prove it first, naming the file.
    validate_or_throw(s, std::string(source));
    check_comms(rows, s, source);
  }
  return s;
}

std::string schedule_to_csv(const Schedule& s) {
  if (!s.placement.empty()) {
    if (std::string e = placement_error(s.placement, s.stages, s.chunks); !e.empty())
      throw UsageError("--format csv: schedule " + s.name + ": placement: " + e);
  }
  const Placement place = placement_of(s);
  std::string out;
  for (size_t st = 0; st < s.actions.size(); ++st) {
    const auto& list = s.actions[st];
    std::string row;
    for (size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      if (a.kind == ActionKind::kSync) {
        throw UsageError("--format csv: schedule " + s.name +
                         " has SYNC barriers, which PyTorch's CSV cannot hold");
      }
      if (!row.empty()) row += ',';
      if (a.overlap && k + 1 < list.size()) {
        row += "(" + compute_cell(a, place, static_cast<int>(st)) + ";" +
               compute_cell(list[k + 1], place, static_cast<int>(st)) + ")OVERLAP_F_B";
        ++k;
      } else {
        row += compute_cell(a, place, static_cast<int>(st));
      }
    }
    out += row + '\n';
  }
  return out;
}

}  // namespace ppb
