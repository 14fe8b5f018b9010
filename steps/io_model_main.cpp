// io_model: the HBM bytes each step's IO model counts for a shape (no GPU needed; tile sizes
// that depend on shared memory use this GPU's, or the H200's 227 KiB without one). CSV out.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/cli_numbers.hpp"
#include "steps/registry.hpp"

int main(int argc, char** argv) {
  CLI::App app{"io_model: HBM bytes of every step's IO model for one shape, as CSV"};
  fs::Shape s{1, 8, 2048, 64};
  bool causal = false;
  app.add_option("-b,--batch", s.B, "batch size")->transform(fs::decimal<int>())->capture_default_str();
  app.add_option("--heads", s.H, "heads")->transform(fs::decimal<int>())->capture_default_str();
  app.add_option("-n,--seq", s.N, "sequence length")->transform(fs::decimal<int>())->capture_default_str();
  app.add_option("-d,--dim", s.d, "head dimension")->transform(fs::decimal<int>())->capture_default_str();
  app.add_flag("--causal", causal, "causal mask");
  CLI11_PARSE(app, argc, argv);
  std::printf("step,pass,B,H,N,d,causal,read_bytes,write_bytes\n");
  for (const auto& step : fs::all_steps())
    for (std::size_t v = 0; v < step.variants.size(); ++v) {
      const std::string name = step.id + (step.variants.size() > 1 ? "/" + step.variants[v] : "");
      auto row = [&](const char* pass, fs::IoCount io) {
        std::printf("%s,%s,%d,%d,%d,%d,%d,%lld,%lld\n", name.c_str(), pass, s.B, s.H, s.N, s.d, causal ? 1 : 0,
                    static_cast<long long>(io.read_bytes), static_cast<long long>(io.write_bytes));
      };
      row("fwd", step.io_forward(s, causal, static_cast<int>(v)));
      if (step.backward) row("bwd", step.io_backward(s, causal, static_cast<int>(v)));
    }
}
