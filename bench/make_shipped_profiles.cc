// Writes every shipped profile (see sim/analytic_shipped.h) into the folder
// given as the first argument, then prints one summary line per file:
// layers, forward + backward time per microbatch, parameter bytes.
//
//   make_shipped_profiles traces
//
// Exit codes: 0 written, 2 bad usage or a file that could not be written.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "sim/analytic_shipped.h"
#include "sim/profile.h"

namespace {

bool write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

std::string summary(const std::string& file_name, const baton::Profile& profile) {
  const baton::LayerRange all{0, profile.num_layers()};
  const double step_ms = (baton::forward_time(profile, all) + baton::backward_time(profile, all)).ms();
  return fmt::format("{:<28} {:>4} layers  fwd+bwd {:>10.3f} ms  params {:>14} B ({:.2f} GiB)", file_name,
                     profile.num_layers(), step_ms, baton::param_bytes(profile, all).value,
                     baton::param_bytes(profile, all).gib());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_shipped_profiles <output folder>\n";
    return 2;
  }
  const std::filesystem::path folder(argv[1]);
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    std::cerr << folder.string() << ": cannot create folder: " << error.message() << "\n";
    return 2;
  }
  for (const baton::ShippedProfile& entry : baton::shipped_profiles()) {
    auto text = baton::shipped_profile_text(entry);
    if (!text) {
      std::cerr << entry.file_name << ": " << text.error().message << "\n";
      return 2;
    }
    const std::filesystem::path path = folder / entry.file_name;
    if (!write_file(path, *text)) {
      std::cerr << path.string() << ": cannot write\n";
      return 2;
    }
    auto profile = baton::parse_profile(*text, path.string());
    if (!profile) {
      std::cerr << profile.error().message << "\n";
      return 2;
    }
    std::cout << summary(entry.file_name, *profile) << "\n";
  }
  return 0;
}
