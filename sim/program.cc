#include "sim/program.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace baton {

namespace {

constexpr std::array<ActionKind, 10> kAllKinds = {
    ActionKind::kForward,   ActionKind::kBackward, ActionKind::kBackwardInput, ActionKind::kBackwardWeight,
    ActionKind::kSendAct,   ActionKind::kRecvAct,  ActionKind::kSendGrad,      ActionKind::kRecvGrad,
    ActionKind::kAllReduce, ActionKind::kStep};

constexpr std::string_view kKindList = "F, B, I, W, SEND_ACT, RECV_ACT, SEND_GRAD, RECV_GRAD, ALLREDUCE or STEP";

// Reads an unsigned decimal number at the front of `text` and drops it.
bool take_number(std::string_view& text, int32_t& out) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, out);
  if (ec != std::errc() || end != text.data() + digits) return false;
  text.remove_prefix(digits);
  return true;
}

// Reads the kind name (capital letters and underscores) at the front of `text`.
std::string_view take_kind_name(std::string_view& text) {
  size_t length = 0;
  while (length < text.size() && (std::isupper(static_cast<unsigned char>(text[length])) || text[length] == '_'))
    ++length;
  std::string_view name = text.substr(0, length);
  text.remove_prefix(length);
  return name;
}

bool find_kind(std::string_view name, ActionKind& out) {
  for (ActionKind kind : kAllKinds) {
    if (kind_name(kind) == name) {
      out = kind;
      return true;
    }
  }
  return false;
}

// Parses the "<w3" / ">w5" suffix of sends and receives.
bool take_peer(std::string_view& text, char arrow, int32_t& peer) {
  if (text.size() < 2 || text[0] != arrow || text[1] != 'w') return false;
  text.remove_prefix(2);
  return take_number(text, peer);
}

}  // namespace

std::string_view kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return "F";
    case ActionKind::kBackward: return "B";
    case ActionKind::kBackwardInput: return "I";
    case ActionKind::kBackwardWeight: return "W";
    case ActionKind::kSendAct: return "SEND_ACT";
    case ActionKind::kRecvAct: return "RECV_ACT";
    case ActionKind::kSendGrad: return "SEND_GRAD";
    case ActionKind::kRecvGrad: return "RECV_GRAD";
    case ActionKind::kAllReduce: return "ALLREDUCE";
    case ActionKind::kStep: return "STEP";
  }
  return "?";
}

namespace {

// The action without its "sK:" prefix: "F7", "SEND_ACT7>w5".
std::string short_text(const Action& action) {
  if (is_send(action.kind)) return fmt::format("{}{}>w{}", kind_name(action.kind), action.batch(), action.peer);
  if (is_recv(action.kind)) return fmt::format("{}{}<w{}", kind_name(action.kind), action.batch(), action.peer);
  return fmt::format("{}{}{}", kind_name(action.kind), action.number, action.paired ? "&" : "");
}

}  // namespace

std::string to_string(const Action& action) { return fmt::format("s{}:{}", action.stage, short_text(action)); }

Result<Action> parse_action(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Error{
        fmt::format("bad action \"{}\": {} (expected e.g. s2:F7, s2:SEND_ACT7>w5, "
                    "s2:RECV_GRAD7<w5, s2:ALLREDUCE3)",
                    text, why)};
  };
  std::string_view rest = text;
  Action action;
  if (rest.empty() || rest[0] != 's') return bad("must start with \"s\" and the stage");
  rest.remove_prefix(1);
  if (!take_number(rest, action.stage)) return bad("has no valid stage number after \"s\"");
  if (rest.empty() || rest[0] != ':') return bad("needs \":\" after the stage");
  rest.remove_prefix(1);
  const std::string_view name = take_kind_name(rest);
  if (!find_kind(name, action.kind)) return bad(fmt::format("unknown kind \"{}\" (kinds: {})", name, kKindList));
  if (!take_number(rest, action.number)) return bad(fmt::format("needs a number after \"{}\"", name));
  if (is_send(action.kind) && !take_peer(rest, '>', action.peer))
    return bad(fmt::format("a {} needs \">w<worker>\" after its number", name));
  if (is_recv(action.kind) && !take_peer(rest, '<', action.peer))
    return bad(fmt::format("a {} needs \"<w<worker>\" after its number", name));
  if (!rest.empty() && rest[0] == '&') {
    if (!can_pair(action.kind))
      return bad(fmt::format("only F, B and I open an overlapped pair (\"&\"), not {}", name));
    action.paired = true;
    rest.remove_prefix(1);
  }
  if (!rest.empty()) return bad(fmt::format("has unexpected trailing text \"{}\"", rest));
  return action;
}

Result<std::vector<Action>> parse_action_list(std::string_view text) {
  std::vector<Action> actions;
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  size_t pos = 0;
  while (pos < text.size()) {
    if (is_space(text[pos])) {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && !is_space(text[end])) ++end;
    auto action = parse_action(text.substr(pos, end - pos));
    if (!action) return Error{fmt::format("action {} of the list: {}", actions.size() + 1, action.error().message)};
    actions.push_back(*action);
    pos = end;
  }
  return actions;
}

int64_t Program::num_actions() const {
  int64_t total = 0;
  for (const std::vector<Action>& list : actions) total += static_cast<int64_t>(list.size());
  return total;
}

int Program::replicas_of(int stage) const {
  return static_cast<int>(
      std::count_if(workers.begin(), workers.end(), [&](const WorkerInfo& w) { return w.runs(stage); }));
}

Program one_replica_program(const Program& program) {
  Program single = program;
  single.workers.clear();
  single.actions.clear();
  single.allreduce_devices.assign(static_cast<size_t>(program.num_stages), {});
  std::vector<int> renumbered(program.workers.size(), -1);
  for (size_t w = 0; w < program.workers.size(); ++w) {
    const WorkerInfo& info = program.workers[w];
    for (int s : stages_of(info)) single.allreduce_devices[s].push_back(info.device);
    if (info.replica != 0) continue;
    renumbered[w] = single.num_workers();
    single.workers.push_back(info);
    single.actions.push_back(program.actions[w]);
  }
  for (auto& list : single.actions)
    for (Action& action : list)
      if (action.peer >= 0) action.peer = renumbered[action.peer];
  return single;
}

std::vector<int> receive_order(const Program& program, int worker) {
  using SendKey = std::tuple<ActionKind, int, int>;  // (kind, stage, microbatch)
  std::map<int, std::map<SendKey, int>> sends;       // peer -> its sends to `worker` -> index
  const auto sends_of = [&](int peer) -> const std::map<SendKey, int>& {
    auto [it, fresh] = sends.try_emplace(peer);
    if (fresh) {
      const std::vector<Action>& list = program.actions[static_cast<size_t>(peer)];
      for (size_t j = 0; j < list.size(); ++j)
        if (is_send(list[j].kind) && list[j].peer == worker)
          it->second[{list[j].kind, list[j].stage, list[j].batch()}] = static_cast<int>(j);
    }
    return it->second;
  };
  std::vector<std::tuple<int, int, int>> keyed;  // (peer, index of the send, index of the receive)
  const std::vector<Action>& mine = program.actions[static_cast<size_t>(worker)];
  for (size_t i = 0; i < mine.size(); ++i) {
    const Action& a = mine[i];
    if (!is_recv(a.kind)) continue;
    const bool activation = a.kind == ActionKind::kRecvAct;
    int send_index = std::numeric_limits<int>::max();
    if (a.peer >= 0 && a.peer < program.num_workers()) {
      const std::map<SendKey, int>& peer_sends = sends_of(a.peer);
      const auto it = peer_sends.find({activation ? ActionKind::kSendAct : ActionKind::kSendGrad,
                                       activation ? a.stage - 1 : a.stage + 1, a.batch()});
      if (it != peer_sends.end()) send_index = it->second;
    }
    keyed.emplace_back(a.peer, send_index, static_cast<int>(i));
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> order;
  for (const auto& entry : keyed) order.push_back(std::get<2>(entry));
  return order;
}

std::vector<std::vector<int>> workers_by_stage(const Program& program) {
  int stages = program.num_stages;
  for (const WorkerInfo& w : program.workers)
    for (int s : stages_of(w)) stages = std::max(stages, s + 1);
  std::vector<std::vector<int>> table(static_cast<size_t>(std::max(stages, 0)));
  for (int id = 0; id < program.num_workers(); ++id) {
    const WorkerInfo& w = program.workers[id];
    if (w.replica < 0) continue;
    for (int s : stages_of(w)) {
      if (s < 0) continue;
      std::vector<int>& replicas = table[s];
      if (static_cast<int>(replicas.size()) <= w.replica) replicas.resize(w.replica + 1, -1);
      replicas[w.replica] = id;
    }
  }
  return table;
}

std::string program_to_text(const Program& program) {
  std::string text;
  for (size_t w = 0; w < program.actions.size(); ++w) {
    text += fmt::format("w{}:", w);
    for (const Action& action : program.actions[w]) {
      text += ' ';
      text += to_string(action);
    }
    text += '\n';
  }
  return text;
}

// ---- the worker x step grid -------------------------------------------------

namespace {

// Which part of the grid to draw: steps [first, last) and the marked cell.
struct GridWindow {
  int first = 0;
  int last = 0;
  int mark_worker = -1;
  int mark_step = -1;
};

// Column widths shared by every row of one grid.
struct GridLayout {
  size_t label_width = 0;
  size_t cell_width = 0;
  std::string left_elision;  // "... " when steps before `first` are hidden
};

int row_length(const Program& program, int worker) {
  return worker < 0 || worker >= static_cast<int>(program.actions.size())
             ? 0
             : static_cast<int>(program.actions[worker].size());
}

bool has_chunks(const Program& program, int worker) {
  return worker >= 0 && worker < program.num_workers() && !program.workers[worker].chunks.empty();
}

// A cell: the action without its "sK:" prefix, which the row label names; a
// worker that runs several chunks keeps it.
std::string cell_text(const Program& program, int worker, const Action& action) {
  return has_chunks(program, worker) ? to_string(action) : short_text(action);
}

std::string row_label(const Program& program, int worker) {
  if (has_chunks(program, worker)) {
    std::string stages;
    for (int s : program.workers[worker].chunks) stages += fmt::format("{}s{}", stages.empty() ? "" : "+", s);
    return fmt::format("w{} {}", worker, stages);
  }
  const int stage = worker < program.num_workers() ? program.workers[worker].stage : -1;
  return fmt::format("w{} s{}", worker, stage);
}

GridLayout grid_layout(const Program& program, const GridWindow& window) {
  GridLayout layout;
  layout.label_width = 4;  // "step"
  size_t text_width = fmt::formatted_size("{}", std::max(window.last - 1, 0));
  for (int w = 0; w < static_cast<int>(program.actions.size()); ++w) {
    layout.label_width = std::max(layout.label_width, row_label(program, w).size());
    const int end = std::min(window.last, row_length(program, w));
    for (int step = window.first; step < end; ++step)
      text_width = std::max(text_width, cell_text(program, w, program.actions[w][step]).size());
  }
  layout.cell_width = text_width + 3;  // room for "[" "]" and one space between cells
  layout.left_elision = window.first > 0 ? "... " : "";
  return layout;
}

void trim_and_end_line(std::string& line, std::string& out) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out += line;
  out += '\n';
}

void append_cell(std::string& line, std::string_view text, bool marked, size_t width) {
  const size_t start = line.size();
  line += marked ? '[' : ' ';
  line += text;
  if (marked) line += ']';
  line.resize(start + width, ' ');
}

void append_header(const GridWindow& window, const GridLayout& layout, std::string& out) {
  std::string line = "step";
  line.resize(layout.label_width, ' ');
  line += '|';
  line += std::string(layout.left_elision.size(), ' ');
  for (int step = window.first; step < window.last; ++step)
    append_cell(line, fmt::format("{}", step), false, layout.cell_width);
  trim_and_end_line(line, out);
}

void append_row(const Program& program, int worker, const GridWindow& window, const GridLayout& layout,
                std::string& out) {
  std::string line = row_label(program, worker);
  line.resize(layout.label_width, ' ');
  line += '|';
  line += layout.left_elision;
  const int length = row_length(program, worker);
  const bool marked_row = worker == window.mark_worker;
  for (int step = window.first; step < window.last; ++step) {
    const bool marked = marked_row && step == window.mark_step;
    if (step >= length && !marked) {
      if (!marked_row || step > window.mark_step) break;
      append_cell(line, "", false, layout.cell_width);
      continue;
    }
    const std::string text = step < length ? cell_text(program, worker, program.actions[worker][step]) : "";
    append_cell(line, text, marked, layout.cell_width);
  }
  if (length > window.last) line += "...";
  trim_and_end_line(line, out);
  if (!marked_row || window.mark_step < window.first || window.mark_step >= window.last) return;
  const size_t column = layout.label_width + 1 + layout.left_elision.size() +
                        static_cast<size_t>(window.mark_step - window.first) * layout.cell_width;
  out += std::string(column + 1, ' ');
  out += "^\n";
}

std::string render_grid(const Program& program, const GridWindow& window) {
  const GridLayout layout = grid_layout(program, window);
  std::string out;
  append_header(window, layout, out);
  for (int w = 0; w < static_cast<int>(program.actions.size()); ++w) append_row(program, w, window, layout, out);
  return out;
}

// Steps to draw: every step any row has, plus the mark when it sits one past a row's end.
int grid_width(const Program& program, int mark_worker, int mark_step) {
  int width = 0;
  for (int w = 0; w < static_cast<int>(program.actions.size()); ++w) width = std::max(width, row_length(program, w));
  if (mark_worker >= 0 && mark_worker < static_cast<int>(program.actions.size()) && mark_step >= 0)
    width = std::max(width, std::min(mark_step, row_length(program, mark_worker)) + 1);
  return width;
}

GridWindow checked_mark(const Program& program, int mark_worker, int mark_step) {
  GridWindow window;
  const bool valid = mark_worker >= 0 && mark_worker < static_cast<int>(program.actions.size()) && mark_step >= 0 &&
                     mark_step <= row_length(program, mark_worker);
  window.mark_worker = valid ? mark_worker : -1;
  window.mark_step = valid ? mark_step : -1;
  return window;
}

}  // namespace

std::string program_grid(const Program& program, int mark_worker, int mark_step) {
  GridWindow window = checked_mark(program, mark_worker, mark_step);
  window.first = 0;
  window.last = grid_width(program, window.mark_worker, window.mark_step);
  return render_grid(program, window);
}

std::string program_grid_excerpt(const Program& program, int mark_worker, int mark_step, int context_steps) {
  GridWindow window = checked_mark(program, mark_worker, mark_step);
  const int context = std::max(context_steps, 0);
  const int center = window.mark_step >= 0 ? window.mark_step : context;
  const int width = grid_width(program, window.mark_worker, window.mark_step);
  window.first = std::max(0, center - context);
  window.last = std::min(width, center + context + 1);
  return render_grid(program, window);
}

}  // namespace baton
