#include "flintkv/db.hpp"

#include "flintkv/internal/open.hpp"

namespace flintkv {

Status DB::Open(const Options& options, const std::string& path, std::unique_ptr<DB>* db) {
  if (db == nullptr) return Status::InvalidArgument("DB::Open: null output pointer");
  try {
    return internal::open_file<internal::default_config>(options, path, db);
  } catch (const std::bad_alloc&) {
    return Status::NoSpace("out of DRAM while opening " + path);
  }
}

Status DB::Check(const std::string& path, CheckReport* report) {
  CheckReport ignored;
  try {
    return internal::check_file<internal::default_config>(path, report ? report : &ignored);
  } catch (const std::bad_alloc&) {
    return Status::NoSpace("out of DRAM while checking " + path);
  }
}

}  // namespace flintkv
