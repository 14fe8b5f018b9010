// Opening a trace file: fa_trace reads it (and refuses what is malformed, with one line that
// says where and why); the validator's findings travel with the document as warnings, since
// a trace that does not add up still replays and is worth looking at.
#include <exception>
#include <new>

#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"
#include "visualizer/model/document.hpp"

namespace fs::viz {

std::unique_ptr<Document> load_document(const std::string& path, std::string& error) {
  try {
    tr::Trace trace = tr::read_trace(path);
    const tr::ValidationReport report = tr::validate(trace);
    auto doc = make_document(std::move(trace), path);
    for (const auto& e : report.errors) doc->warnings.push_back("validator: " + e);
    for (const auto& w : report.warnings) doc->warnings.push_back("validator (warning): " + w);
    return doc;
  } catch (const std::bad_alloc&) {
    error = path + ": not enough memory to open this trace";
  } catch (const std::exception& e) {
    error = e.what();
  }
  return nullptr;
}

}  // namespace fs::viz
