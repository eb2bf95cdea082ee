// Text and JSON reports of a planning outcome (used by `baton plan`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "planner/planner.h"

namespace baton::cli {

// The planner's figures stored in a plan file's "prediction" field.
nlohmann::json prediction_json(const PlannerOutcome& outcome);
// `baton plan --json`.
nlohmann::json outcome_json(const PlannerOutcome& outcome);
// The table a person acts on.
std::string outcome_text(const PlannerOutcome& outcome, const Profile& profile, const Topology& topology,
                         const PlannerOptions& options);

}  // namespace baton::cli
