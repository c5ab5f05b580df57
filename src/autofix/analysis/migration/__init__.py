"""What ``autofix migrate`` needs beyond the rules: what a single-device script trains and why
it cannot be migrated, steps written inline in loops, where the strategy goes, and what migrated
code must show."""
