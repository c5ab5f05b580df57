"""The exit codes of every command, in one place (README's "Exit codes" table says the same).

| code | check | diff | fix | migrate | smoke |
| --- | --- | --- | --- | --- | --- |
| 0 | no findings | nothing would change | done | nothing to migrate, or every migration written | trained, every check passed |
| 1 | findings | changes shown | with --smoke: a fixed script failed | a migration shown, or declined with its reason; with --smoke: one failed | a check failed |
| 2 | an error: a file could not be read or parsed, a bad option or configuration, an output that could not be written | same | same | same | the harness itself failed |
"""

OK = 0
# check: findings; diff: changes to show; migrate: a migration shown or declined;
# fix --smoke / smoke: a check failed.
FINDINGS = FAILED = 1
# A file, an option, the configuration or an output could not be used; smoke: the harness failed.
ERROR = HARNESS = 2
