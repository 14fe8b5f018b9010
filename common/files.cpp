#include "common/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/errors.hpp"

namespace fs {

namespace {

namespace stdfs = std::filesystem;

std::string reason(int err) { return std::strerror(err); }

// The folder a file at `path` goes into ("." for a bare name).
std::string folder_of(const std::string& path) {
  const stdfs::path parent = stdfs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Why `dir`, which must exist, is not a folder this process can create files in; or empty.
std::string writable_folder_problem(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return dir + " cannot be opened (" + reason(errno) + ")";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return "the folder " + dir + " is not writable (" + reason(errno) + ")";
  return {};
}

// Why `p`, which stat(2) cannot find, is missing: its nearest part that exists (lstat(2)) is a
// symbolic link whose target does not — create_directories would throw on it, after the work.
// Empty when no such link is on the way.
std::string dangling_link_problem(const stdfs::path& p) {
  for (stdfs::path part = p; !part.empty(); part = part.parent_path()) {
    struct stat st {};
    if (::lstat(part.c_str(), &st) == 0) {
      if (!S_ISLNK(st.st_mode) || ::stat(part.c_str(), &st) == 0) return {};
      std::error_code ec;
      const stdfs::path target = stdfs::read_symlink(part, ec);
      return part.string() + " is a symbolic link to " + (ec ? std::string("a missing path") : target.string()) +
             ", which does not exist";
    }
    if (part == part.root_path()) break;
  }
  return {};
}

// write(2) until all of [data, data + size) is written; false with errno set on failure.
bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    size -= std::size_t(n);
  }
  return true;
}

}  // namespace

std::string input_file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "cannot open (" + reason(errno) + ")";
  if (S_ISDIR(st.st_mode)) return "is a folder, not a file";
  if (S_ISFIFO(st.st_mode))
    return "is a pipe or FIFO, not a regular file (a shell's <(...) is one): write it to a file first";
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  if (::access(path.c_str(), R_OK) != 0) return "cannot open (" + reason(errno) + ")";
  return {};
}

std::uint64_t require_input_file(const std::string& path) {
  if (std::string why = input_file_problem(path); !why.empty()) throw InputError(path + ": " + why);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(path + ": cannot open (" + reason(errno) + ")");
  return std::uint64_t(st.st_size);
}

std::string output_file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    // An existing output is replaced (a temporary file renamed over it) or appended to: only a
    // regular file can be. A FIFO would block the append; a rename would replace a device.
    if (S_ISDIR(st.st_mode)) return path + " is a folder, not a file";
    if (S_ISFIFO(st.st_mode)) return path + " is a pipe or FIFO, not a regular file: name a file to write";
    if (!S_ISREG(st.st_mode)) return path + " is not a regular file: name a file to write";
  } else if (std::string why = dangling_link_problem(path); !why.empty()) {
    return why;
  }
  const std::string dir = folder_of(path);
  if (::stat(dir.c_str(), &st) != 0) return "the folder " + dir + " does not exist";
  return writable_folder_problem(dir);
}

std::string output_dir_problem(const std::string& dir) {
  stdfs::path p = stdfs::path(dir).lexically_normal();
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0) return writable_folder_problem(p.string());
  if (std::string why = dangling_link_problem(p); !why.empty()) return why;
  // Missing: the program creates it, so its nearest existing parent must take a new folder.
  for (p = p.parent_path(); !p.empty(); p = p.parent_path()) {
    if (::stat(p.c_str(), &st) == 0) return writable_folder_problem(p.string());
    if (p == p.root_path()) break;
  }
  return writable_folder_problem(".");
}

void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& parts) {
  auto fail = [&](int err) -> void { throw InputError(path + ": cannot write (" + reason(err) + ")"); };
  // A name no other writer of the same file uses: this process, and a counter within it.
  static std::atomic<unsigned> counter{0};
  const stdfs::path final_path(path);
  const std::string tmp =
      (stdfs::path(folder_of(path)) / ("." + final_path.filename().string() + "." + std::to_string(::getpid()) + "." +
                                       std::to_string(counter++) + ".partial"))
          .string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(errno);
  bool ok = true;
  for (const ByteSpan& part : parts) ok = ok && write_all(fd, part.data, part.size);
  ok = ok && ::fsync(fd) == 0;  // the data is on disk before the name points at it
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    fail(err);
  }
}

void append_file(const std::string& path, std::string_view text) {
  auto fail = [&](int err) -> void { throw InputError(path + ": cannot append (" + reason(err) + ")"); };
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) fail(errno);
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0;
  const bool ok = write_all(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  if (!ok) {
    if (sized) (void)!::ftruncate(fd, st.st_size);  // no partial row left behind
    ::close(fd);
    fail(err);
  }
  if (::close(fd) != 0) fail(errno);
}

}  // namespace fs
