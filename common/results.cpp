#include "common/results.hpp"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "common/errors.hpp"

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

std::string csv_line(const ResultRow& r) {
  std::ostringstream out;
  out << r.gpu << ',' << r.step << ',' << r.pass << ',' << r.dtype << ',' << r.B << ',' << r.H
      << ',' << r.N << ',' << r.d << ',' << (r.causal ? 1 : 0) << ',' << r.dropout << ',' << r.mask << ','
      << std::setprecision(4) << r.density << ',' << std::fixed
      << std::setprecision(4) << r.median_ms << ',' << std::setprecision(3) << r.tflops << ','
      << r.peak_mem_bytes << ',' << r.hbm_bytes_model << ',';
  if (r.max_err) out << std::scientific << std::setprecision(3) << *r.max_err;
  out << ',' << build_commit() << ',' << today_utc();
  return out.str();
}

void append_csv(const std::string& path, const ResultRow& row) {
  bool need_header = true;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    need_header = !in || in.tellg() == 0;
  }
  std::ofstream out(path, std::ios::app);
  if (!out) throw InputError(path + ": cannot open for appending");
  if (need_header) out << csv_header() << '\n';
  out << csv_line(row) << '\n';
  if (!out) throw InputError(path + ": write failed");
}

}  // namespace fs
