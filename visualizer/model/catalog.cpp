#include "visualizer/model/catalog.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

namespace fs::viz {

namespace stdfs = std::filesystem;

namespace {

void add_folder(const stdfs::path& dir, bool from_cli, std::vector<CatalogEntry>& out) {
  std::error_code ec;
  std::vector<CatalogEntry> found;
  for (stdfs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".json") continue;
    found.push_back({it->path().string(), it->path().filename().string(), it->file_size(ec), from_cli});
  }
  std::sort(found.begin(), found.end(), [](const CatalogEntry& a, const CatalogEntry& b) { return a.name < b.name; });
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace

std::vector<CatalogEntry> list_traces(const std::vector<std::string>& folders,
                                      const std::vector<std::string>& command_line) {
  std::vector<CatalogEntry> out;
  for (const auto& p : command_line) {
    std::error_code ec;
    if (stdfs::is_directory(p, ec))
      add_folder(p, true, out);
    else
      out.push_back({p, stdfs::path(p).filename().string(), stdfs::exists(p, ec) ? stdfs::file_size(p, ec) : 0, true, true});
  }
  for (const auto& f : folders) add_folder(f, false, out);
  std::set<std::string> seen;
  std::vector<CatalogEntry> unique;
  for (auto& e : out) {
    std::error_code ec;
    const auto canon = stdfs::weakly_canonical(e.path, ec);
    if (seen.insert(ec ? e.path : canon.string()).second) unique.push_back(std::move(e));
  }
  return unique;
}

std::string command_line_problem(const std::vector<std::string>& command_line) {
  for (const auto& p : command_line) {
    std::error_code ec;
    if (!stdfs::is_directory(p, ec)) continue;
    std::vector<CatalogEntry> found;
    add_folder(p, true, found);
    if (found.empty()) return p + ": no trace files (*.json) in this folder";
  }
  return {};
}

int default_entry(const std::vector<CatalogEntry>& entries) {
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (entries[i].named) return int(i);
  auto find = [&](bool cli, auto pred) {
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (entries[i].from_command_line == cli && pred(entries[i].name)) return int(i);
    return -1;
  };
  // docs/traces/record.sh names them <step>[_<variant>].<pass>.json: 04_online_softmax.fwd.json.
  auto is04 = [](const std::string& n) { return n.rfind("04", 0) == 0 || n.rfind("step04", 0) == 0; };
  auto step04_fwd = [&](const std::string& n) { return is04(n) && n.find("fwd") != std::string::npos; };
  auto step04 = [&](const std::string& n) { return is04(n); };
  auto any = [](const std::string&) { return true; };
  for (bool cli : {true, false}) {
    int i = find(cli, step04_fwd);
    if (i < 0) i = find(cli, step04);
    if (i < 0) i = find(cli, any);
    if (i >= 0) return i;
  }
  return -1;
}

}  // namespace fs::viz
