#pragma once
// Reading a sweep's SQLite store in tests.

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tpsim::test {

// Every row of `sql` on the database at `db` (read-only; waits up to 10 s for a
// writer), each column as text ("NULL" for NULL). A database that cannot be
// opened or a statement that does not prepare is a test failure.
inline std::vector<std::vector<std::string>> Query(const std::string& db, const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << db;
    sqlite3_close(h);
    return rows;
  }
  sqlite3_busy_timeout(h, 10000);  // a sweep may be writing it
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(h);
  } else {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<std::string> r;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* t = sqlite3_column_text(st, c);
        r.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
      rows.push_back(std::move(r));
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rows;
}

// The single integer `sql` returns; a missing value is a test failure (and -1).
inline int64_t Scalar(const std::string& db, const std::string& sql) {
  auto r = Query(db, sql);
  if (r.empty() || r[0].empty() || r[0][0] == "NULL") {
    ADD_FAILURE() << sql << ": no value";
    return -1;
  }
  return std::stoll(r[0][0]);
}

// Rows in the `points` table so far, 0 while the store does not exist yet or is
// not readable (for polling a running sweep: never a test failure).
inline int64_t StoredPoints(const std::string& db) {
  if (!std::filesystem::exists(db)) return 0;
  sqlite3* h = nullptr;
  sqlite3_stmt* st = nullptr;
  int64_t n = 0;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(h, "SELECT COUNT(*) FROM points", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return n;
}

}  // namespace tpsim::test
