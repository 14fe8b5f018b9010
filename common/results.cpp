#include "common/results.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <sstream>

#include "common/files.hpp"

namespace fs {

extern const char* const kBuildCommit;  // generated at build time (cmake/version.cmake)

std::string build_commit() {
  if (const char* env = std::getenv("FS_COMMIT"); env && *env) return env;
  return kBuildCommit;
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string csv_header() {
  return "gpu,step,pass,dtype,B,H,N,d,causal,dropout,mask,density,median_ms,tflops,peak_mem_bytes,"
         "hbm_bytes_model,max_err,commit,date";
}

namespace {
// A text field as CSV (RFC 4180): quoted, inner quotes doubled, where it holds a comma, a quote
// or a line break (a mask file's name can), else as it is.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + '"';
}
}  // namespace

std::string csv_line(const ResultRow& r) {
  std::ostringstream out;
  out << csv_field(r.gpu) << ',' << csv_field(r.step) << ',' << r.pass << ',' << r.dtype << ',' << r.B << ',' << r.H
      << ',' << r.N << ',' << r.d << ',' << (r.causal ? 1 : 0) << ',' << r.dropout << ',' << csv_field(r.mask) << ','
      << std::setprecision(4) << r.density << ',' << std::fixed
      << std::setprecision(4) << r.median_ms << ',' << std::setprecision(3) << r.tflops << ','
      << r.peak_mem_bytes << ',' << r.hbm_bytes_model << ',';
  if (r.max_err) out << std::scientific << std::setprecision(3) << *r.max_err;
  out << ',' << build_commit() << ',' << today_utc();
  return out.str();
}

void append_csv(const std::string& path, const ResultRow& row) {
  struct stat st {};
  const bool need_header = ::stat(path.c_str(), &st) != 0 || st.st_size == 0;
  append_file(path, (need_header ? csv_header() + '\n' : std::string()) + csv_line(row) + '\n');
}

}  // namespace fs
