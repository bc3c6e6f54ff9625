// File: read_file.h
// Reading a file a user names (a config.json, a --layers stack, a train.yaml): a regular file only,
// and only up to a size cap. A directory, a device (/dev/zero, /dev/urandom), a FIFO without a writer
// or a socket is refused before anything is read, so no input can make a census read for ever,
// block, or exhaust memory.
//
//   auto text = read_regular_file(path, "give a HyperParallel train.yaml");
//   CENSUS_TRY(text);
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/result.h"

namespace census {

// The largest input file read: far above any config.json, stack or recipe (a few KiB to a few MiB).
inline constexpr off_t kLargestInputFile = off_t{16} << 20;

// The text of the regular file at `path`, or a refusal naming the path and ending with `advice`.
inline Result<std::string> read_regular_file(const std::string& path, const std::string& advice) {
  auto refused = [&](const std::string& why) { return refuse(path, why + "; " + advice); };
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return refused("cannot be read (" + std::string(std::strerror(errno)) + ")");
  if (S_ISDIR(info.st_mode)) return refused("is a directory, not a file");
  if (!S_ISREG(info.st_mode)) return refused("is not a regular file (a device, FIFO or socket)");
  // O_NONBLOCK: should the path become a FIFO between stat and open, opening it does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return refused("cannot be read (" + std::string(std::strerror(errno)) + ")");
  std::string text;
  bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  if (regular && info.st_size <= kLargestInputFile) {
    char buffer[1 << 16];
    for (;;) {
      const ssize_t got = ::read(fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        regular = got == 0;
        break;
      }
      text.append(buffer, static_cast<size_t>(got));
      if (static_cast<off_t>(text.size()) > kLargestInputFile) break;
    }
  }
  ::close(fd);
  if (!regular) return refused("cannot be read as a regular file");
  if (static_cast<off_t>(text.size()) > kLargestInputFile) return refused("is larger than 16 MiB");
  return text;
}

}  // namespace census
