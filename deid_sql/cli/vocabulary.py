"""The command line's vocabulary: what each option name means, whichever command takes it.

One name, one meaning: ``--risk-model`` is the risk model on every command, a limit is named after
the spec's ``[release]`` key it mirrors (``--min-k``, ``--max-risk``), ``--report`` always writes
the report a reviewer signs.  tests/test_vocabulary.py walks the command tree and holds every
option of every command to this table (its kind of value too), so a new option either reuses a
name with its meaning or adds a row here; ``deid-sql help options`` prints it.  Plain data: the
root group's help imports nothing heavy.
"""

from __future__ import annotations

# option name -> (kind of value, meaning); kinds: flag, int, number, text, path, choice
MEANINGS: dict[str, tuple[str, str]] = {
    # inputs: what to read, what to release
    "--policy": ("text", "the policy: its text ('age:every=10|zip:digits=3'), @FILE, or a named release "
                         "('safe-harbor' where a command takes one)"),
    "--levels": ("text", "hierarchy levels instead of --policy ('sex:0|age:3'), as anonymize prints them"),
    "--source": ("path", "a new batch's file (.csv, .parquet or .duckdb)"),
    "--source-table": ("text", "the table read: inside a .duckdb --source or DATA (init), in the engine, or the "
                               "source table's name in the SQL a command writes"),
    "--linked": ("text", "a linked table's batch as NAME=FILE (repeat for each)"),
    "--linked-table": ("text", "a linked table's batch as NAME=TABLE of the engine (repeat for each)"),
    "--from-release": ("path", "a release's record (FILE.release.json) to report on"),
    "--from-policy": ("path", "a policy file ('deid-sql policy save') to report on"),
    "--frontier": ("path", "a frontier run's folder ('deid-sql frontier --out DIR')"),
    "--sensitive": ("text", "the sensitive column (not a QI) that l-diversity, t-closeness and the confidence "
                            "bound protect"),
    "--path": ("choice", "how metrics are computed: fast (cells) or sql (the reference query)"),
    # the risk model and the release's limits ([release] keys)
    "--risk-model": ("choice", "the risk model, instead of the spec's risk"),
    "--min-k": ("int", "the smallest group a release may have (the spec's [release] min_k)"),
    "--min-l": ("int", "the fewest distinct sensitive values a released group may hold (l-diversity)"),
    "--min-entropy-l": ("number", "the smallest exp(entropy) of a released group's sensitive values (entropy "
                                  "l-diversity, the spec's [release] min_entropy_l)"),
    "--recursive-cl": ("number", "recursive (c,l)-diversity as C L: a group's most common sensitive value below C "
                                 "times the l-th and rarer ones together (the spec's [release] recursive_cl)"),
    "--max-t": ("number", "the largest distance of a group's sensitive values to the whole source's (t-closeness, "
                          "the spec's [release] max_t)"),
    "--t-distance": ("choice", "the distance of --max-t: equal, ordered or hierarchical (the spec's t_distance)"),
    "--t-hierarchy": ("path", "the sensitive column's hierarchy file for --t-distance hierarchical"),
    "--max-confidence": ("number", "the largest share of a group's persons holding one sensitive value "
                                   "(the spec's [release] max_confidence)"),
    "--max-presence": ("number", "the largest share of a group's census people that is released (delta-presence, "
                                 "the spec's [release] max_presence)"),
    "--max-risk": ("text", "the limit on the normalized risk (the spec's [release] max_risk), or 'safe-harbor'"),
    "--max-mean-record-risk": ("number", "the limit on the mean record risk (expected re-identifications per "
                                         "record)"),
    "--max-suppressed-share": ("number", "the share of records that may be suppressed, at most"),
    "--suppress-below": ("int", "suppress the records of groups smaller than K (their QIs become '*')"),
    "--drift-limit": ("number", "an exact drift limit on the mean record risk for 'check' and 'apply'"),
    "--accept-risk": ("text", "the reason a release that fails the spec's release criteria goes out anyway"),
    "--accept-drift": ("text", "the reason a drifted batch is released anyway"),
    # outputs
    "--out": ("path", "where the command writes its result (a file, or a folder for a set or a run)"),
    "-o": ("path", "short for --out"),
    "--table": ("text", "the table the release is written to (inside a .duckdb --out, or in the engine)"),
    "--tables": ("text", "the prefix of the tables a set of linked tables is written to"),
    "--view": ("text", "the view the release is created as: its name (in --db, or in the engine)"),
    "--db": ("path", "the DuckDB file that holds --view"),
    "--format": ("choice", "a file's format when its extension does not tell (the file written; init: DATA read)"),
    "--report": ("path", "also write the report a reviewer signs (FILE.html and its JSON twin)"),
    "--figures": ("path", "also write the figures printed as JSON"),
    "--save-policy": ("path", "also save the release's policy as a policy file for new batches"),
    "--sensitivity": ("path", "also sweep the adversary's costs and detection into FILE.csv and its plot"),
    "--sql": ("text", "also print the release's SELECT in this SQL dialect"),
    "--json": ("flag", "print JSON on stdout instead of text"),
    "--no-json": ("flag", "print text even when stdout is not a terminal (evaluate prints JSON to a pipe)"),
    "--bits": ("flag", "also give each policy as its bit string"),
    "--overwrite": ("flag", "replace outputs that exist: files, tables, views (otherwise they are refused before "
                            "anything is read)"),
    "--sample-rows": ("int", "rows of the release shown in the report (0: made-up rows)"),
    # the searches
    "--method": ("choice", "the search method"),
    "--seed": ("int", "the random seed (the same seed, the same result)"),
    "--budget": ("int", "how many policies the frontier search evaluates"),
    "-n": ("int", "how much the search does: --budget (frontier) or --iterations (alternatives)"),
    "--iterations": ("int", "how many boundary policies the search looks for"),
    "--th": ("number", "the frontier search's threshold for searching a sublattice"),
    "--resume": ("flag", "continue the run checkpointed in --out"),
    "--metric": ("choice", "the quality model the search optimizes"),
    "--time-limit": ("number", "stop after this many seconds with the best found so far"),
    "--traversal": ("choice", "how the full-domain search walks the transformations"),
    "--store": ("choice", "how the full-domain search keeps predictive properties"),
    "--store-stats": ("flag", "also print how each property store was used"),
    "--candidates": ("text", "how many output channels to consider, or 'all'"),
    "--integer": ("choice", "whole subjects from an integer program: always, never, or auto"),
    "--scenario": ("choice", "what the attacker knows of a group's size: known or unknown"),
    "--solver": ("choice", "how the adversary's decision process is solved"),
    # SQL and dbt
    "--dialect": ("text", "the SQL dialect (or dbt adapter) of the SQL written"),
    "-d": ("text", "short for --dialect"),
    "--project": ("path", "the dbt project folder"),
    "--model": ("text", "the dbt model's name"),
    "--prefix": ("text", "the prefix of the dbt models of a set"),
    "--source-name": ("text", "the dbt source's name"),
    "--source-schema": ("text", "the dbt source table's schema"),
    "--materialized": ("choice", "the dbt materialization"),
    "--profile": ("text", "the dbt profile named in a dbt_project.yml this command creates"),
    # policy files
    "--fallback": ("text", "the label of later values outside the saved domains"),
    "--shift-alpha": ("number", "the false-alarm rate of the drift check's test of label shares"),
    # the demo
    "--dir": ("path", "the folder the demo writes"),
    "--adult": ("path", "the folder of the Adult data (instead of the synthetic demo)"),
    "--ehr": ("flag", "the demo with several rows per person"),
    # every command
    "--no-cache": ("flag", "read the data again instead of reusing what an earlier command read"),
    "--verbose": ("flag", "show the engine's own log on stderr"),
    "-p": ("text", "short for --policy"),
    "-s": ("path", "short for --source"),
    "--help": ("flag", "show the help and exit"),
    "-h": ("flag", "short for --help"),
    "--version": ("flag", "show the version and exit"),
}


def describe() -> str:
    """The vocabulary as text (``deid-sql help options``)."""
    width = max(len(name) for name in MEANINGS)
    lines = ["options: one name, one meaning on every command", ""]
    lines += [f"  {name:<{width}}  {meaning}" for name, (_, meaning) in sorted(MEANINGS.items(),
                                                                             key=lambda kv: kv[0].lstrip("-"))]
    return "\n".join(lines)
