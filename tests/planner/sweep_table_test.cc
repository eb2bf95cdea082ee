// Sweep tables: their CSV (RFC 4180 quoting) read back, and shards merged.
#include <string>

#include "tests/catch_compat.h"

#include "planner/sweep_table.h"

namespace baton {
namespace {

SweepTable table_of(std::vector<std::vector<std::string>> rows) {
  SweepTable table{{"point", "grid_points", "model", "topology", "servers", "schedule", "error"}, std::move(rows)};
  return table;
}

std::vector<std::string> row(int point, int of, const std::string& error = "") {
  return {std::to_string(point), std::to_string(of), "GPT 1.3B (24 layers, h 2048)", "a100", "4", "1f1b", error};
}

TEST_CASE("sweep table: the CSV quotes what needs quoting and reads back the same") {
  const SweepTable table = table_of({row(0, 2, "said \"no\", twice\nthen stopped"), row(1, 2)});
  const std::string csv = sweep_csv(table);
  CHECK(csv.find(",\"GPT 1.3B (24 layers, h 2048)\",a100,") != std::string::npos);  // a comma: quoted
  CHECK(csv.find("\"said \"\"no\"\", twice\nthen stopped\"") != std::string::npos);
  const auto back = parse_sweep_csv(csv, "t.csv");
  REQUIRE(back.ok());
  CHECK(back->header == table.header);
  CHECK(back->rows == table.rows);
  CHECK(back->axis_columns() == std::vector<int>{4});  // between the lead columns and `schedule`
}

TEST_CASE("sweep table: a file that is not a sweep, or has a short line, is refused with the line") {
  const auto foreign = parse_sweep_csv("a,b\n1,2\n", "x.csv");
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.error().message.find("x.csv: not a baton sweep CSV") != std::string::npos);
  std::string csv = sweep_csv(table_of({row(0, 2)}));
  csv += "1,2,m\n";
  const auto short_line = parse_sweep_csv(csv, "y.csv");
  REQUIRE_FALSE(short_line.ok());
  CHECK(short_line.error().message.find("y.csv: line 3 has 3 fields, the header 7") != std::string::npos);
}

TEST_CASE("sweep table: shards merge into point order whatever order they are given in") {
  const SweepTable whole = table_of({row(0, 5), row(1, 5), row(2, 5), row(3, 5), row(4, 5)});
  const SweepTable a = table_of({row(0, 5), row(1, 5)}), b = table_of({row(2, 5)}),
                   c = table_of({row(3, 5), row(4, 5)});
  const auto merged = merge_sweep_tables({{"c", c}, {"a", a}, {"empty", table_of({})}, {"b", b}});
  REQUIRE(merged.ok());
  CHECK(sweep_csv(*merged) == sweep_csv(whole));
}

TEST_CASE("sweep table: merging refuses a repeated, a missing or a foreign shard") {
  const SweepTable a = table_of({row(0, 3), row(1, 3)}), b = table_of({row(2, 3)});
  const auto twice = merge_sweep_tables({{"a.csv", a}, {"again.csv", a}, {"b.csv", b}});
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message.find("point 0 is in a.csv and in again.csv") != std::string::npos);
  const auto missing = merge_sweep_tables({{"a.csv", a}});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("1 of the grid's 3 points are missing, the first is point 2") !=
        std::string::npos);
  SweepTable other = b;
  other.header[4] = "bandwidth_gbps.1";
  const auto foreign = merge_sweep_tables({{"a.csv", a}, {"other.csv", other}});
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.error().message.find("other.csv has other columns") != std::string::npos);
  const auto grids = merge_sweep_tables({{"a.csv", a}, {"b.csv", table_of({row(2, 4)})}});
  REQUIRE_FALSE(grids.ok());
  CHECK(grids.error().message.find("grid of 4 points, the others 3") != std::string::npos);
  // Same columns and grid size, another model: shards of two sweeps.
  SweepTable other_model = b;
  other_model.rows[0][2] = "vgg16";
  const auto models = merge_sweep_tables({{"a.csv", a}, {"vgg.csv", other_model}});
  REQUIRE_FALSE(models.ok());
  CHECK(models.error().message ==
        "sweep merge: vgg.csv swept model \"vgg16\", a.csv \"GPT 1.3B (24 layers, h 2048)\" (not shards of one "
        "sweep)");
  // The topology may be an axis: rows of one sweep name different ones.
  SweepTable elsewhere = b;
  elsewhere.rows[0][3] = "h100";
  CHECK(merge_sweep_tables({{"a.csv", a}, {"b.csv", elsewhere}}).ok());
}

}  // namespace
}  // namespace baton
