// The process's resident memory by kind, from /proc/self/status, for the benchmark drivers
// (`flintkv bench`'s space line, bench/peers' peak DRAM):
//
//   if (const auto r = read_resident()) dram = r->anon;   // the pool's pages are shmem
//
// Thread safety: read_resident may be called from any thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>

namespace flintkv::tools {

struct resident_memory {
  // RssAnon (heap, index, stacks), RssFile (the program's and libraries' pages), RssShmem
  // (pages of files in tmpfs: a pool in /dev/shm), in bytes.
  std::uint64_t anon = 0, file = 0, shmem = 0;
  std::uint64_t total() const { return anon + file + shmem; }
};

// nullopt when /proc/self/status cannot be read or lacks a field.
inline std::optional<resident_memory> read_resident() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return std::nullopt;
  resident_memory r;
  int seen = 0;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "RssAnon: %llu", &kib) == 1) {
      r.anon = kib * 1024, ++seen;
    } else if (std::sscanf(line, "RssFile: %llu", &kib) == 1) {
      r.file = kib * 1024, ++seen;
    } else if (std::sscanf(line, "RssShmem: %llu", &kib) == 1) {
      r.shmem = kib * 1024, ++seen;
    }
  }
  std::fclose(f);
  if (seen != 3) return std::nullopt;
  return r;
}

}  // namespace flintkv::tools
